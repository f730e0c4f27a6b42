"""Writing audit events: appended to the chain in the caller's transaction, delivered after it."""

import hashlib
import hmac
import logging
import uuid
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, event_hash
from audit.models import AuditEvent, ChainHead, Delivery

logger = logging.getLogger("hyperbook.audit")

SOURCE = "hyperbook"
_EVENT_FIELDS = {f.name for f in AuditEvent._meta.get_fields() if f.concrete}


def prompt_fingerprint(prompt: str) -> str:
    """A keyed hash of the prompt: equal prompts can be correlated, the text cannot be read back."""
    key = settings.TOKEN_FINGERPRINT_KEY.encode()
    return hmac.new(key, b"prompt:" + prompt.encode(), hashlib.sha256).hexdigest()


def audit_events_append(*, events: Iterable[dict], source: str = SOURCE) -> list[AuditEvent]:
    """Append events to the source's chain, in order, inside one transaction.

    Each dict holds AuditEvent field values (unknown keys are refused). The chain head row is locked
    for the transaction, so concurrent writers (threads, workers, hosts) never interleave a chain.
    """
    events = list(events)
    if not events:
        return []
    for values in events:
        unknown = set(values) - _EVENT_FIELDS
        if unknown:
            raise ValueError(f"unknown audit fields: {sorted(unknown)}")
    with transaction.atomic():
        ChainHead.objects.get_or_create(source=source, defaults={"last_hash": GENESIS_HASH})
        head = ChainHead.objects.select_for_update().get(source=source)
        sequence, prev_hash = head.last_sequence, head.last_hash
        rows = []
        now = timezone.now()
        for values in events:
            sequence += 1
            row = {
                "masked_columns": [],
                "changes": {},
                **{name: "" for name in _BLANK_TEXT},
                **values,
                "id": values.get("id") or uuid.uuid4(),
                "source": source,
                "sequence": sequence,
                "occurred_at": values.get("occurred_at") or now,
                "prev_hash": prev_hash,
            }
            row["hash"] = prev_hash = event_hash(row)
            rows.append(AuditEvent(**row))
        AuditEvent.objects.bulk_create(rows)
        Delivery.objects.bulk_create(
            Delivery(event_id=row.id, sequence=row.sequence, next_attempt_at=now) for row in rows
        )
        ChainHead.objects.filter(source=source).update(last_sequence=sequence, last_hash=prev_hash)
        transaction.on_commit(_queue_delivery)
    return rows


def audit_record(**values) -> AuditEvent:
    """Record one event (an admin or service change) in the caller's transaction."""
    return audit_events_append(events=[values])[0]


def audit_change(*, action: str, actor, target: str, before: dict | None, after: dict | None):
    """An admin/service change with a before/after of its non-secret fields."""
    return audit_record(
        action=action,
        outcome=AuditEvent.Outcome.CHANGED,
        actor=getattr(actor, "get_username", lambda: "")() if actor is not None else "system",
        target=target[:128],
        changes={"before": before, "after": after},
    )


_BLANK_TEXT = (
    "request_id",
    "rpc_method",
    "tool",
    "stakeholder_id",
    "stakeholder_role",
    "token_prefix",
    "token_fingerprint",
    "client_address",
    "origin",
    "user_agent",
    "prompt_hash",
    "actor",
    "target",
    "detail",
)


def _queue_delivery() -> None:
    # Imported here: the task module imports Celery, which services otherwise need not load.
    from audit.tasks import request_delivery

    request_delivery()
