from django.core.management.base import BaseCommand, CommandError

from audit.verification import verify_and_record


class Command(BaseCommand):
    help = "Verify the audit hash chain; report the first broken or missing link (exit 1 if any)."

    def add_arguments(self, parser):
        parser.add_argument("--source", default="hyperbook")

    def handle(self, *args, source, **options):
        report = verify_and_record(source=source)
        if not report.ok:
            raise CommandError(report.message)
        self.stdout.write(report.message)
