from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from audit.models import AuditCheckpoint
from audit.reconciliation import reconcile_with_memory_api
from audit.signed_note import CosignatureVerifier, NoteError
from audit.verification import verify_and_record
from audit.verify import witness_summary
from audit.witnesses import configured_witnesses


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
        parser.add_argument(
            "--witness-key",
            action="append",
            default=[],
            metavar="KEY",
            help="a witness's cosignature/v1 key; without any, the AUDIT_WITNESSES keys",
        )
        parser.add_argument("--quorum", type=int, help="default: AUDIT_WITNESS_QUORUM")

    def handle(self, *args, source, against_memory_api, witness_key, quorum, **options):
        report = verify_and_record(source=source)
        if not report.ok:
            raise CommandError(report.message)
        self.stdout.write(report.message)
        try:
            witnesses = [CosignatureVerifier.from_text(k) for k in witness_key] or [
                w.verifier for w in configured_witnesses()
            ]
        except NoteError as exc:
            raise CommandError(f"--witness-key: {exc}") from None
        if witnesses:
            checkpoints = AuditCheckpoint.objects.filter(source=source, head_hash__isnull=False)
            notes = [(str(c.number), c.witnessed_note()) for c in checkpoints.order_by("number")]
            quorum = max(quorum or settings.AUDIT_WITNESS_QUORUM, 1)
            self.stdout.write(witness_summary(notes, witnesses, quorum))
        if against_memory_api:
            anchored = reconcile_with_memory_api(source=source)
            if not anchored.ok:
                raise CommandError(f"Memory API: {anchored.message}")
            self.stdout.write(f"Memory API: {anchored.message}")
