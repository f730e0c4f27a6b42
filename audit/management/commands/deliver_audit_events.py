from django.core.management.base import BaseCommand

from audit.delivery import deliver_pending


class Command(BaseCommand):
    help = (
        "Deliver pending audit events and signed checkpoints to the egs2 Memory API now "
        "(what the workers do)."
    )

    def handle(self, *args, **options):
        report = deliver_pending()
        if report.skipped:
            self.stdout.write(report.skipped)
        self.stdout.write(
            f"delivered {report.delivered}, rejected {report.rejected}, to retry {report.retried}; "
            f"checkpoints delivered {report.checkpoints_delivered}"
        )
