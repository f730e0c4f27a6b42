"""Witnesses cosign our checkpoints (C2SP tlog-witness): each is sent a new checkpoint with the
consistency proof from the last size it cosigned, checks it, and returns a cosignature/v1 line.
A log that showed one witness a history and another witness (or an auditor) a different one is
caught by them, not by us. A witness that refuses, fails or is slow raises an alarm; nothing on
`/mcp`'s path waits for one (the task runs in a worker)."""

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from audit.export import encoded
from audit.models import AuditCheckpoint, Cosignature, DeliveryAlarm, WitnessState
from audit.signed_note import (
    SIGNATURE_PREFIX,
    CosignatureVerifier,
    NoteError,
    cosignatures_by,
)
from audit.tree import TreeError, consistency_proof
from core.outbound import OutboundError, post_text

logger = logging.getLogger("hyperbook.audit")

ALARM_KIND = "witness"  # DeliveryAlarm.kind of a witness's alarm, with its name after a colon
MAX_REPLY_BYTES = 64 * 1024
SIZE_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class Witness:
    url: str  # its submission prefix
    verifier: CosignatureVerifier

    @property
    def key(self) -> str:
        return self.verifier.text()


def configured_witnesses() -> list[Witness]:
    witnesses = []
    for position, entry in enumerate(settings.AUDIT_WITNESSES, start=1):
        url, _, key = entry.strip().partition(" ")
        if not url.startswith(("https://", "http://")) or not key.strip():
            raise ImproperlyConfigured(f"AUDIT_WITNESSES, witness {position}: write it as URL KEY")
        try:
            witnesses.append(Witness(url.rstrip("/"), CosignatureVerifier.from_text(key)))
        except NoteError as exc:
            raise ImproperlyConfigured(f"AUDIT_WITNESSES, witness {position}: {exc}") from None
    return witnesses


def witness_latest(source: str) -> dict[str, str]:
    """Ask the witnesses to cosign the latest checkpoint (a witness only ever needs the latest:
    its consistency proof covers the ones it missed)."""
    latest = AuditCheckpoint.objects.filter(source=source).order_by("-number").first()
    if latest is None or not settings.AUDIT_WITNESSES:
        return {}
    return witness_checkpoint(latest)


def witness_checkpoint(checkpoint: AuditCheckpoint) -> dict[str, str]:
    """Ask every configured witness to cosign `checkpoint`; returns each witness's outcome."""
    if checkpoint.head_hash is None:
        return {}  # signed before the tree: there is no consistency proof a witness could check
    return {w.verifier.name: _ask(w, checkpoint) for w in configured_witnesses()}


def _ask(witness: Witness, checkpoint: AuditCheckpoint) -> str:
    state, _ = WitnessState.objects.get_or_create(
        verifier_key=witness.key, defaults={"name": witness.verifier.name, "url": witness.url}
    )
    if Cosignature.objects.filter(checkpoint=checkpoint, witness_key=witness.key).exists():
        return "cosigned"
    old, size = state.last_size, checkpoint.sequence
    # One retry, from the size a 409 says the witness has: our record of it may be behind.
    for _attempt in range(2):
        if old > size:
            return _failed(state, f"it has cosigned size {old}, beyond this checkpoint's {size}")
        try:
            proof = [] if old in (0, size) else consistency_proof(checkpoint.source, old, size)
        except TreeError as exc:
            return _failed(state, str(exc))
        body = f"old {old}\n" + "".join(h + "\n" for h in encoded(proof)) + "\n" + checkpoint.note
        try:
            status, reply, content_type = post_text(
                f"{witness.url}/add-checkpoint",
                body=body,
                headers={"Content-Type": "text/plain; charset=utf-8"},
                timeout=settings.AUDIT_WITNESS_TIMEOUT_SECONDS,
                max_bytes=MAX_REPLY_BYTES,
            )
        except OutboundError as exc:
            return _failed(state, f"it could not be reached ({exc})")
        if status == 409 and content_type.split(";")[0].strip() == SIZE_TYPE:
            known = reply.decode("ascii", "replace").strip()
            if not known.isdigit() or int(known) == old:
                return _failed(state, f"it refused size {size} (409) and holds size {known[:20]}")
            old = int(known)
            WitnessState.objects.filter(pk=state.pk).update(last_size=old)
            continue
        if status != 200:
            return _failed(state, f"it answered {status}")
        return _store(state, witness, checkpoint, reply)
    return _failed(state, "it kept refusing the old size")


def _store(state: WitnessState, witness: Witness, checkpoint, reply: bytes) -> str:
    text = reply.decode("utf-8", "replace")
    lines = [line for line in text.split("\n") if line.startswith(SIGNATURE_PREFIX)]
    for line in lines:
        try:
            when = cosignatures_by(checkpoint.note + line + "\n", [witness.verifier])
        except NoteError:
            continue
        if not when:
            continue
        cosigned_at = dt.datetime.fromtimestamp(next(iter(when.values())), tz=dt.UTC)
        with transaction.atomic():
            Cosignature.objects.get_or_create(
                checkpoint=checkpoint,
                witness_key=witness.key,
                defaults={"line": line, "cosigned_at": cosigned_at},
            )
            WitnessState.objects.filter(pk=state.pk).update(
                last_size=checkpoint.sequence,
                last_cosigned_at=timezone.now(),
                failing_since=None,
                last_problem="",
            )
            DeliveryAlarm.objects.filter(kind=_alarm_kind(state), cleared_at__isnull=True).update(
                cleared_at=timezone.now()
            )
        return "cosigned"
    return _failed(state, "its reply holds no valid cosignature by its key")


def _failed(state: WitnessState, problem: str) -> str:
    message = f"witness {state.name}: {problem}"[:300]
    logger.warning("audit: %s", message)
    WitnessState.objects.filter(pk=state.pk, failing_since__isnull=True).update(
        failing_since=timezone.now()
    )
    WitnessState.objects.filter(pk=state.pk).update(last_problem=message)
    if not DeliveryAlarm.objects.filter(
        kind=_alarm_kind(state), message=message, cleared_at__isnull=True
    ).exists():
        DeliveryAlarm.objects.create(kind=_alarm_kind(state), message=message)
    return "failed"


def _alarm_kind(state: WitnessState) -> str:
    return f"{ALARM_KIND}:{state.name}"[:64]


def is_witnessed(checkpoint: AuditCheckpoint, quorum: int | None = None) -> bool:
    """Whether enough configured witnesses have cosigned it (their lines verify)."""
    witnesses = [w.verifier for w in configured_witnesses()]
    if not witnesses:
        return False
    needed = quorum or settings.AUDIT_WITNESS_QUORUM
    return len(cosignatures_by(checkpoint.witnessed_note(), witnesses)) >= needed


def unwitnessed_checkpoints(source: str):
    """Tree checkpoints with fewer cosignatures stored than the quorum, oldest first."""
    return (
        AuditCheckpoint.objects.filter(source=source, head_hash__isnull=False)
        .annotate(cosigned=Count("cosignatures"))
        .filter(cosigned__lt=settings.AUDIT_WITNESS_QUORUM)
        .order_by("number")
    )
