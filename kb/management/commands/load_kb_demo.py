from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kb.services import DEMO_DATA_DIR, LoadError, kb_demo_load


class Command(BaseCommand):
    help = "Load the KB demo dataset (kb/data/kb_demo) in one transaction; a second run is a no-op."

    def add_arguments(self, parser):
        parser.add_argument("--folder", type=Path, default=DEMO_DATA_DIR, help="CSV folder")

    def handle(self, *args, folder: Path, **options):
        try:
            report = kb_demo_load(folder=folder)
        except LoadError as exc:
            raise CommandError(str(exc)) from exc
        if not report.changed:
            total = sum(report.unchanged.values())
            self.stdout.write(f"KB demo data already loaded ({total} rows)")
            return
        for name in report.created:
            self.stdout.write(
                f"{name}: created {report.created[name]}, updated {report.updated[name]}, "
                f"unchanged {report.unchanged[name]}"
            )
