from django.core.management.base import BaseCommand, CommandError

from audit.reconciliation import reconcile_with_memory_api
from audit.verification import verify_and_record


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain and its signed checkpoints; report the first broken or "
        "missing link (exit 1 if any). With --against-memory-api, also compare the chain with the "
        "checkpoints the Memory API holds (what a rewrite of the database cannot change)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--source", default="hyperbook")
        parser.add_argument(
            "--against-memory-api",
            action="store_true",
            help="read the delivered checkpoints back from the Memory API and compare",
        )

    def handle(self, *args, source, against_memory_api, **options):
        report = verify_and_record(source=source)
        if not report.ok:
            raise CommandError(report.message)
        self.stdout.write(report.message)
        if against_memory_api:
            anchored = reconcile_with_memory_api(source=source)
            if not anchored.ok:
                raise CommandError(f"Memory API: {anchored.message}")
            self.stdout.write(f"Memory API: {anchored.message}")
