from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from audit.models import AuditCheckpoint, DeliveryAlarm
from audit.reconciliation import reconcile_with_memory_api
from audit.signed_note import CosignatureVerifier, NoteError
from audit.verification import verify_and_record
from audit.verify import cosigned, witness_summary
from audit.verify.keys import quorum_problem
from audit.witnesses import configured_witnesses


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain and its signed checkpoints; report the first broken or "
        "missing link (exit 1 if any, or while a checkpoint conflict alarm is open). With "
        "--against-memory-api, also compare the chain with the checkpoints the Memory API holds "
        "(what a rewrite of the database cannot change)."
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
        parser.add_argument(
            "--quorum",
            type=int,
            help=(
                "fail unless this many witnesses cosigned the latest checkpoint (default: only "
                "report which checkpoints AUDIT_WITNESS_QUORUM witnesses cosigned)"
            ),
        )

    def handle(self, *args, source, against_memory_api, witness_key, quorum, **options):
        witnesses = _witnesses(witness_key)
        if witnesses or quorum is not None:
            asked, where = (
                (quorum, "--quorum")
                if quorum is not None
                else (settings.AUDIT_WITNESS_QUORUM, "AUDIT_WITNESS_QUORUM")
            )
            known = "given with --witness-key" if witness_key else "in AUDIT_WITNESSES"
            problem = quorum_problem(asked, len(witnesses), known)
            if problem:
                raise CommandError(f"{where}: {problem}")
        report = verify_and_record(source=source)
        if not report.ok:
            raise CommandError(report.message)
        _refuse_while_in_conflict(report.events_checked)
        self.stdout.write(report.message)
        if witnesses:
            self._witnessing(source, witnesses, quorum)
        if against_memory_api:
            anchored = reconcile_with_memory_api(source=source)
            if not anchored.ok:
                raise CommandError(f"Memory API: {anchored.message}")
            self.stdout.write(f"Memory API: {anchored.message}")

    def _witnessing(
        self, source: str, witnesses: list[CosignatureVerifier], quorum: int | None
    ) -> None:
        """Which checkpoints the quorum cosigned; with --quorum, fail unless the latest is one."""
        checkpoints = AuditCheckpoint.objects.filter(source=source, head_hash__isnull=False)
        notes = [(str(c.number), c.witnessed_note()) for c in checkpoints.order_by("number")]
        needed = settings.AUDIT_WITNESS_QUORUM if quorum is None else quorum
        summary = witness_summary(notes, witnesses, needed)
        if quorum is None:
            self.stdout.write(summary)
            return
        if not notes:
            raise CommandError(f"no checkpoint over the tree is signed yet; {summary}")
        number, latest = notes[-1]
        found = cosigned(latest, witnesses)
        if found < quorum:
            raise CommandError(
                f"checkpoint {number}, the latest, has {found} of the {quorum} witness "
                f"cosignatures --quorum asks for; {summary}"
            )
        self.stdout.write(summary)


def _witnesses(keys: list[str]) -> list[CosignatureVerifier]:
    """The witness keys given, or the configured witnesses'; each once (it counts once)."""
    try:
        given = [CosignatureVerifier.from_text(k) for k in keys]
    except NoteError as exc:
        raise CommandError(f"--witness-key: {exc}") from None
    witnesses = given or [w.verifier for w in configured_witnesses()]
    distinct = {(w.name, w.key_id): w for w in witnesses}
    if len(distinct) < len(witnesses):
        raise CommandError("a witness key is given twice: it would count twice towards a quorum")
    return witnesses


def _refuse_while_in_conflict(events_checked: int) -> None:
    """The Memory API holds another copy of one of our checkpoints: the anchor outside our
    database no longer vouches for the chain, however intact it reads here, until an operator
    has looked (the alarm is cleared by no later delivery)."""
    conflicts = list(
        DeliveryAlarm.objects.filter(
            kind=DeliveryAlarm.CHECKPOINT_CONFLICT, cleared_at__isnull=True
        ).values_list("message", flat=True)
    )
    if conflicts:
        raise CommandError(
            f"not verified: {len(conflicts)} checkpoint conflict alarm"
            f"{'' if len(conflicts) == 1 else 's'} open ({conflicts[0]}); the {events_checked} "
            "events match our own checkpoints, but the Memory API's copy is not ours"
        )
