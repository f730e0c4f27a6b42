"""Checking the chain: every sequence present, every hash recomputed, every link matching."""

from dataclasses import dataclass

from audit.chain import GENESIS_HASH, event_hash
from audit.models import AuditEvent, ChainHead, ChainVerification

FIELDS = [f.name for f in AuditEvent._meta.concrete_fields]


@dataclass
class ChainReport:
    ok: bool
    events_checked: int
    message: str
    first_bad_sequence: int | None = None


def verify_chain(*, source: str = "hyperbook", chunk: int = 5000) -> ChainReport:
    expected_sequence, expected_prev = 1, GENESIS_HASH
    checked = 0
    last_sequence = 0
    while True:
        rows = list(
            AuditEvent.objects.filter(source=source, sequence__gte=expected_sequence)
            .order_by("sequence")
            .values(*FIELDS)[:chunk]
        )
        if not rows:
            break
        for row in rows:
            sequence = row["sequence"]
            if sequence != expected_sequence:
                return _bad(checked, expected_sequence, f"missing event #{expected_sequence}")
            if row["prev_hash"] != expected_prev:
                return _bad(
                    checked, sequence, f"event #{sequence} does not link to #{sequence - 1}"
                )
            if event_hash(row) != row["hash"]:
                return _bad(checked, sequence, f"event #{sequence} was altered (hash mismatch)")
            expected_prev, expected_sequence = row["hash"], sequence + 1
            last_sequence = sequence
            checked += 1
    head = ChainHead.objects.filter(source=source).first()
    if head is not None and head.last_sequence != last_sequence:
        return _bad(
            checked,
            last_sequence + 1,
            f"missing event #{last_sequence + 1} (chain head is #{head.last_sequence})",
        )
    if head is not None and head.last_hash != expected_prev:
        return _bad(checked, last_sequence, "the chain head does not match the last event")
    return ChainReport(True, checked, f"{checked} events, chain intact")


def verify_and_record(*, source: str = "hyperbook") -> ChainReport:
    report = verify_chain(source=source)
    ChainVerification.objects.create(
        ok=report.ok, events_checked=report.events_checked, message=report.message[:300]
    )
    return report


def _bad(checked: int, sequence: int, message: str) -> ChainReport:
    return ChainReport(False, checked, message, first_bad_sequence=sequence)
