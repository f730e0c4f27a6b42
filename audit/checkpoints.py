"""Signed checkpoints over the audit log, the proof an outsider can check.

A hash chain shows accidental damage; someone with write access to the database can still rewrite
it and recompute every hash. So, every AUDIT_CHECKPOINT_EVERY events or AUDIT_CHECKPOINT_SECONDS
(whichever comes first, and only when there are new events), the root of the log's RFC 6962
Merkle tree (`audit.merkle`, whose last leaf is the chain's head) is signed with Ed25519 as a C2SP
signed note (`audit.signed_note`) and delivered to the Memory API, which keeps a copy outside our
database. Checkpoints signed before the tree existed signed the chain's head itself; they stay
valid under that rule (`AuditCheckpoint.head_hash` is empty for them). A rewritten or shortened
chain no longer matches the copies there
(`audit.reconciliation`), and an export carries the checkpoints that cover it (`audit.verify`).

The checkpoint's Memory API id is derived from its origin and number, so that anyone can ask the
Memory API for checkpoint n + 1 without trusting our database to say it exists.
"""

import functools
import logging
import uuid

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from audit import merkle
from audit.chain import GENESIS_HASH
from audit.models import AuditCheckpoint, AuditEvent, ChainHead, CheckpointDelivery, SigningKey
from audit.services import SOURCE, audit_change
from audit.signed_note import Checkpoint, NoteError, Signer, Verifier, open_checkpoint

logger = logging.getLogger("hyperbook.audit")


@functools.cache
def _signer_from(text: str) -> Signer:
    return Signer.from_text(text)


def current_signer() -> Signer:
    """The signer key from AUDIT_SIGNING_KEY(_FILE). Its text is a secret: errors never show it."""
    text = settings.AUDIT_SIGNING_KEY
    if not text:
        raise ImproperlyConfigured("AUDIT_SIGNING_KEY (or AUDIT_SIGNING_KEY_FILE) is not set")
    try:
        return _signer_from(text)
    except (NoteError, ValueError):
        raise ImproperlyConfigured(
            "AUDIT_SIGNING_KEY is not a signer key (PRIVATE+KEY+name+keyid+base64)"
        ) from None


def configured_verifiers() -> list[Verifier]:
    """The keys a checkpoint may be signed by, as far as each may sign: `verifiers_from_settings`,
    narrowed by the retirements recorded in the admin (the smaller last size wins). Trust comes
    from configuration; the database can only take some away."""
    retired = {
        key: last_size
        for key, last_size in SigningKey.objects.filter(last_size__isnull=False).values_list(
            "verifier_key", "last_size"
        )
        if last_size is not None  # the filter says so; the types cannot
    }
    return [
        verifier.retired_at(retired[verifier.text()]) if verifier.text() in retired else verifier
        for verifier in verifiers_from_settings()
    ]


def verifiers_from_settings() -> list[Verifier]:
    """The current signer's key and AUDIT_VERIFIER_KEYS (the keys before a rotation, each
    optionally `@SIZE`: the last checkpoint size it signed)."""
    verifiers = [current_signer().verifier]
    for position, text in enumerate(settings.AUDIT_VERIFIER_KEYS, start=1):
        try:
            verifiers.append(Verifier.from_text(text))
        except (NoteError, ValueError) as exc:
            raise ImproperlyConfigured(f"AUDIT_VERIFIER_KEYS, key {position}: {exc}") from None
    return verifiers


class KeyRetirementError(ValueError):
    """The key cannot be retired; the message says why and is safe to show."""


def signing_key_retire(*, key: SigningKey, actor) -> SigningKey:
    """Record that `key` signs no more: its last size is the last checkpoint it signed, and any
    checkpoint it signs beyond that is refused. The current signer's key is never retired (rotate
    AUDIT_SIGNING_KEY first), and a retirement is never undone."""
    if key.verifier_key == current_signer().verifier.text():
        raise KeyRetirementError("the current signer's key cannot be retired: rotate it first")
    if key.retired_at is not None:
        raise KeyRetirementError("this key is already retired")
    signed = AuditCheckpoint.objects.filter(key_id=key.key_id).order_by("-sequence").first()
    with transaction.atomic():
        key.retired_at, key.last_size = timezone.now(), signed.sequence if signed else 0
        key.save(update_fields=["retired_at", "last_size"])
        audit_change(
            action=AuditEvent.Action.SIGNING_KEY_RETIRED,
            actor=actor,
            target=f"signing_key:{key.name}+{key.key_id}",
            before={"retired": False},
            after={"retired": True, "last_size": key.last_size},
        )
    return key


def origin_for(source: str) -> str:
    return f"{settings.AUDIT_ORIGIN}/{source}"


def checkpoint_memory_id(origin: str, number: int) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"https://{origin}/checkpoint/{number}")


def checkpoint_create_if_due(
    *, source: str = SOURCE, now=None, force: bool = False
) -> AuditCheckpoint | None:
    """Sign the chain's head if a checkpoint is due (`force`: whenever there are new events).

    The head row is locked meanwhile, so the signed (sequence, hash) is the head as committed
    and two workers never sign the same number twice."""
    now = now or timezone.now()
    signer = current_signer()
    with transaction.atomic():
        head = ChainHead.objects.select_for_update().filter(source=source).first()
        if head is None or head.last_sequence == 0:
            return None
        last = AuditCheckpoint.objects.filter(source=source).order_by("-number").first()
        if last is not None and last.sequence >= head.last_sequence:
            return None  # nothing new since the last checkpoint
        due = (
            force
            or last is None
            or head.last_sequence - last.sequence >= settings.AUDIT_CHECKPOINT_EVERY
            or (now - last.created_at).total_seconds() >= settings.AUDIT_CHECKPOINT_SECONDS
        )
        if not due:
            return None
        origin = origin_for(source)
        number = last.number + 1 if last else 1
        root = head_tree_root(head).hex()
        note = signer.sign(Checkpoint(origin, head.last_sequence, root).body())
        key_id = f"{signer.key_id:08x}"
        checkpoint = AuditCheckpoint.objects.create(
            id=checkpoint_memory_id(origin, number),
            source=source,
            number=number,
            sequence=head.last_sequence,
            hash=root,
            head_hash=head.last_hash,
            prev_hash=last.hash if last else GENESIS_HASH,
            origin=origin,
            key_id=key_id,
            note=note,
            created_at=now,
        )
        CheckpointDelivery.objects.create(checkpoint=checkpoint)
        SigningKey.objects.get_or_create(
            verifier_key=signer.verifier.text(),
            defaults={"key_id": key_id, "name": signer.name, "first_used_at": now},
        )
    logger.info("audit: checkpoint %s signed at #%s", number, head.last_sequence)
    return checkpoint


def head_tree_root(head: ChainHead) -> bytes:
    """The root of the tree over every event up to the (locked) head, from its frontier."""
    return merkle.frontier_root(merkle.frontier_from_hex(head.tree_frontier))


def opened_checkpoint(checkpoint: AuditCheckpoint, verifiers: list[Verifier]) -> Checkpoint:
    """The checkpoint's note, verified, and its columns agreeing with it. Raises NoteError."""
    signed = open_checkpoint(checkpoint.note, verifiers)
    if (signed.origin, signed.size, signed.root_hash) != (
        checkpoint.origin,
        checkpoint.sequence,
        checkpoint.hash,
    ):
        raise NoteError("its columns do not say what its signed note says")
    return signed
