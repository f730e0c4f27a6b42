"""Checking the chain: every sequence present, every hash recomputed, every link matching, and
every stored checkpoint signed by a trusted key over the hash the chain has at its sequence."""

from dataclasses import dataclass

from audit.chain import GENESIS_HASH, event_hash
from audit.checkpoints import configured_verifiers, opened_checkpoint
from audit.models import AuditCheckpoint, AuditEvent, ChainHead, ChainVerification
from audit.selectors import events_in_sequence
from audit.signed_note import NoteError

FIELDS = [f.name for f in AuditEvent._meta.concrete_fields]


@dataclass
class ChainReport:
    ok: bool
    events_checked: int
    message: str
    first_bad_sequence: int | None = None
    checkpoints_checked: int = 0


def verify_chain(*, source: str = "hyperbook", chunk: int = 5000) -> ChainReport:
    checkpoints, problem = _stored_checkpoints(source)
    if problem is not None:
        return problem
    expected_sequence, expected_prev = 1, GENESIS_HASH
    checked = 0
    last_sequence = 0
    for row in events_in_sequence(source=source, fields=FIELDS, chunk=chunk):
        sequence = row["sequence"]
        if sequence != expected_sequence:
            return _bad(checked, expected_sequence, f"missing event #{expected_sequence}")
        if row["prev_hash"] != expected_prev:
            return _bad(checked, sequence, f"event #{sequence} does not link to #{sequence - 1}")
        if event_hash(row) != row["hash"]:
            return _bad(checked, sequence, f"event #{sequence} was altered (hash mismatch)")
        signed = checkpoints.get(sequence)
        if signed is not None and signed.hash != row["hash"]:
            return _bad(
                checked,
                sequence,
                f"event #{sequence} does not match signed checkpoint {signed.number}",
            )
        expected_prev, expected_sequence = row["hash"], sequence + 1
        last_sequence = sequence
        checked += 1
    beyond = [c for c in checkpoints.values() if c.sequence > last_sequence]
    if beyond:
        signed = min(beyond, key=lambda c: c.sequence)
        return _bad(
            checked,
            last_sequence + 1,
            f"missing event #{last_sequence + 1} (signed checkpoint {signed.number} "
            f"covers #{signed.sequence})",
        )
    head = ChainHead.objects.filter(source=source).first()
    if head is not None and head.last_sequence != last_sequence:
        return _bad(
            checked,
            last_sequence + 1,
            f"missing event #{last_sequence + 1} (chain head is #{head.last_sequence})",
        )
    if head is not None and head.last_hash != expected_prev:
        return _bad(checked, last_sequence, "the chain head does not match the last event")
    message = f"{checked} events, chain intact; {len(checkpoints)} signed checkpoints verified"
    return ChainReport(True, checked, message, checkpoints_checked=len(checkpoints))


def _stored_checkpoints(source: str) -> tuple[dict[int, AuditCheckpoint], ChainReport | None]:
    """The stored checkpoints by the sequence they cover, each verified against the trusted
    keys; or the first problem with them. They number 1, 2, 3… without gaps."""
    verifiers = configured_verifiers()
    by_sequence: dict[int, AuditCheckpoint] = {}
    expected_number = 1
    for checkpoint in AuditCheckpoint.objects.filter(source=source).order_by("number"):
        if checkpoint.number != expected_number:
            return {}, _bad(0, checkpoint.sequence, f"missing checkpoint {expected_number}")
        try:
            opened_checkpoint(checkpoint, verifiers)
        except NoteError as exc:
            return {}, _bad(
                0, checkpoint.sequence, f"checkpoint {checkpoint.number} is not valid: {exc}"
            )
        by_sequence[checkpoint.sequence] = checkpoint
        expected_number += 1
    return by_sequence, None


def verify_and_record(*, source: str = "hyperbook") -> ChainReport:
    report = verify_chain(source=source)
    ChainVerification.objects.create(
        ok=report.ok, events_checked=report.events_checked, message=report.message[:300]
    )
    return report


def _bad(checked: int, sequence: int, message: str) -> ChainReport:
    return ChainReport(False, checked, message, first_bad_sequence=sequence)
