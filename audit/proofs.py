"""Proofs over the signed log: one event's inclusion in a checkpoint's tree, the consistency of two
tree sizes, and the bundle that proves chosen events on their own (`python -m audit.verify`)."""

from collections.abc import Iterable, Iterator

from audit.checkpoints import checkpoint_create_if_due, origin_for
from audit.export import encoded, event_record
from audit.models import AuditCheckpoint, AuditEvent
from audit.services import SOURCE
from audit.tree import TreeError, consistency_proof, inclusion_proof, tree_size
from audit.verify import BUNDLE_TYPE, BUNDLE_VERSION, PROOF_TYPE


class ProofError(ValueError):
    """No such proof can be given; the message says why and is safe to show. `status` is the
    HTTP status it answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def proving_checkpoint(source: str, tree_size: int | None) -> AuditCheckpoint:
    """The checkpoint signed over the tree at `tree_size`, or the latest one."""
    checkpoints = AuditCheckpoint.objects.filter(source=source)
    if tree_size is None:
        checkpoint = checkpoints.order_by("-number").first()
        if checkpoint is None:
            raise ProofError("no checkpoint has been signed yet", 404)
    else:
        checkpoint = checkpoints.filter(sequence=tree_size).order_by("-number").first()
        if checkpoint is None:
            raise ProofError(f"no checkpoint was signed at tree size {tree_size}", 404)
    if checkpoint.head_hash is None:
        raise ProofError(
            f"checkpoint {checkpoint.number} was signed before the tree existed: it signs the "
            "chain's head, which an inclusion proof cannot lead to; prove against a later one",
            409,
        )
    return checkpoint


def event_inclusion(*, sequence: int, tree_size: int | None = None, source: str = SOURCE) -> dict:
    """Event #sequence's inclusion proof in the tree a signed checkpoint is over."""
    checkpoint = proving_checkpoint(source, tree_size)
    if not 1 <= sequence <= checkpoint.sequence:
        raise ProofError(f"event #{sequence} is not in the tree of size {checkpoint.sequence}", 400)
    try:
        hashes = inclusion_proof(source, sequence, checkpoint.sequence)
    except TreeError as exc:
        raise ProofError(str(exc), 409) from None
    return {
        "leaf_index": sequence - 1,
        "tree_size": checkpoint.sequence,
        "hashes": encoded(hashes),
        "checkpoint": checkpoint.witnessed_note(),
    }


def tree_consistency(*, old: int, new: int, source: str = SOURCE) -> dict:
    """The proof that the log at size `old` is a prefix of the log at size `new`."""
    if not 1 <= old <= new:
        raise ProofError("from and to must be tree sizes with 1 <= from <= to")
    if new > tree_size(source):
        raise ProofError(f"the log holds fewer than {new} events", 404)
    try:
        hashes = consistency_proof(source, old, new)
    except TreeError as exc:
        raise ProofError(str(exc), 409) from None
    return {"from": old, "to": new, "hashes": encoded(hashes)}


def proof_bundle(sequences: Iterable[int], *, source: str = SOURCE) -> Iterator[dict]:
    """The bundle's lines: a header, then each event with its inclusion proof in the latest
    checkpoint's tree (one is signed first when it does not cover them) and that checkpoint's
    signed note. Raises ProofError before the first line when an event cannot be proven (so no
    partial bundle is written)."""
    wanted = sorted(set(sequences))
    latest = AuditCheckpoint.objects.filter(source=source).order_by("-number").first()
    if wanted and (latest is None or latest.sequence < wanted[-1]):
        # As an export does: the events asked for are proven now, not at the next checkpoint.
        checkpoint_create_if_due(source=source, force=True)
    checkpoint = proving_checkpoint(source, None)
    beyond = [s for s in wanted if not 1 <= s <= checkpoint.sequence]
    if beyond:
        raise ProofError(f"there is no event #{beyond[0]} (the log holds #{checkpoint.sequence})")
    rows = {
        row["sequence"]: row
        for row in AuditEvent.objects.filter(source=source, sequence__in=wanted).values(
            *(f.name for f in AuditEvent._meta.concrete_fields)
        )
    }
    proofs = [
        event_inclusion(sequence=s, tree_size=checkpoint.sequence, source=source) for s in wanted
    ]
    yield bundle_header(source)
    for sequence, proof in zip(wanted, proofs, strict=True):
        yield {"type": PROOF_TYPE, "event": event_record(rows[sequence]), **proof}


def bundle_header(source: str) -> dict:
    """A proof bundle's first line."""
    return {
        "type": BUNDLE_TYPE,
        "version": BUNDLE_VERSION,
        "source": source,
        "origin": origin_for(source),
    }
