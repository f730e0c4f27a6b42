"""A receipt for one tool call: the call's audit event with its inclusion proof under a signed
checkpoint (cosigned by AUDIT_WITNESS_QUORUM witnesses when witnesses are configured), as a proof
bundle `python -m audit.verify` checks on its own. The agent's user keeps it as evidence that the
call was recorded, and that the log's operator cannot later drop or change it unseen.

Only the delegation that made the call may fetch it (anyone else is told it does not exist). It
holds the event as recorded (what the caller sent and was answered, counted and fingerprinted:
never a prompt's words or a token), one-way hashes of the rest of the log, and the checkpoint's
tree size and root.
"""

from uuid import UUID

from django.conf import settings
from django.db.models import Count

from audit.export import event_record
from audit.models import AuditCheckpoint, AuditEvent
from audit.proofs import bundle_header, event_inclusion
from audit.services import SOURCE
from audit.verify import PROOF_TYPE


class ReceiptUnknown(LookupError):
    """No such call of this delegation's (or no such event at all: the two read the same)."""


class ReceiptPending(Exception):
    """The call is recorded, and no (cosigned) checkpoint covers it yet: ask again later."""


def call_receipt(*, event_id: str, delegation_id: int, source: str = SOURCE) -> list[dict]:
    """The receipt's lines: the bundle's header and the call's proven event."""
    try:
        UUID(event_id)
    except ValueError:
        raise ReceiptUnknown(event_id) from None
    row = (
        AuditEvent.objects.filter(
            source=source,
            id=event_id,
            delegation_id=delegation_id,
            action=AuditEvent.Action.MCP_TOOLS_CALL,
        )
        .values()
        .first()
    )
    if row is None:
        raise ReceiptUnknown(event_id)
    checkpoint = _covering_checkpoint(source, row["sequence"])
    if checkpoint is None:
        raise ReceiptPending(row["sequence"])
    proof = event_inclusion(sequence=row["sequence"], tree_size=checkpoint.sequence, source=source)
    return [bundle_header(source), {"type": PROOF_TYPE, "event": event_record(dict(row)), **proof}]


def _covering_checkpoint(source: str, sequence: int) -> AuditCheckpoint | None:
    """The latest tree checkpoint over the event, witnessed by the quorum if there are witnesses."""
    checkpoints = AuditCheckpoint.objects.filter(
        source=source, sequence__gte=sequence, head_hash__isnull=False
    )
    if settings.AUDIT_WITNESSES:
        checkpoints = checkpoints.annotate(cosigned_by=Count("cosignatures")).filter(
            cosigned_by__gte=settings.AUDIT_WITNESS_QUORUM
        )
    return checkpoints.order_by("-number").first()
