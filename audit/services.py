"""Writing audit events: appended to the chain in the caller's transaction, delivered after it."""

import hashlib
import hmac
import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
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


def audit_events_append(
    *, events: Iterable[dict], source: str = SOURCE, return_events: bool = True
) -> list[AuditEvent]:
    """Append events to the source's chain, in order, inside one transaction.

    Each dict holds AuditEvent field values (unknown keys are refused). The chain head row is locked
    for the transaction, so concurrent writers (threads, workers, hosts) never interleave a chain.
    Every /mcp request comes through here, so the statements are built once per thread and run
    directly (values still pass through each field's own preparation, exactly as the ORM would).
    """
    events = list(events)
    if not events:
        return []
    for values in events:
        unknown = values.keys() - _EVENT_FIELDS
        if unknown:
            raise ValueError(f"unknown audit fields: {sorted(unknown)}")
    connection = connections[DEFAULT_DB_ALIAS]
    with transaction.atomic():
        statements = _statements(connection)
        with connection.cursor() as cursor:
            cursor.execute(statements.head, [source])
            found = cursor.fetchone()
            if found is None:
                ChainHead.objects.get_or_create(source=source, defaults={"last_hash": GENESIS_HASH})
                cursor.execute(statements.head, [source])
                found = cursor.fetchone()
            sequence, prev_hash = found
            now = timezone.now()
            rows = []
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
                rows.append(row)
            cursor.executemany(
                statements.insert_event,
                [_prepared(_EVENT_COLUMNS, row, connection) for row in rows],
            )
            cursor.executemany(
                statements.insert_delivery,
                [
                    _prepared(
                        _DELIVERY_COLUMNS,
                        {
                            "event_id": row["id"],
                            "sequence": row["sequence"],
                            "next_attempt_at": now,
                        },
                        connection,
                    )
                    for row in rows
                ],
            )
            cursor.execute(statements.update_head, [sequence, prev_hash, source])
        transaction.on_commit(_queue_delivery)
    return [_saved_event(row) for row in rows] if return_events else []


@dataclass(frozen=True)
class _Statements:
    head: str
    update_head: str
    insert_event: str
    insert_delivery: str


_EVENT_COLUMNS = tuple(AuditEvent._meta.concrete_fields)
_DELIVERY_COLUMNS = tuple(Delivery._meta.concrete_fields)
_statements_by_thread = threading.local()


def _statements(connection) -> _Statements:
    # Only model metadata and quoted names go into this SQL; every value is a bound parameter.
    cached = getattr(_statements_by_thread, connection.vendor, None)
    if cached is not None:
        return cached
    quote = connection.ops.quote_name

    def insert(model, fields) -> str:
        columns = ", ".join(quote(f.column) for f in fields)
        return (
            f"INSERT INTO {quote(model._meta.db_table)} ({columns}) "  # noqa: S608
            f"VALUES ({', '.join(['%s'] * len(fields))})"
        )

    head = quote(ChainHead._meta.db_table)
    # SQLite has no row locks; its IMMEDIATE transactions already serialise writers.
    lock = "" if connection.vendor == "sqlite" else " FOR UPDATE"
    statements = _Statements(
        head=f"SELECT last_sequence, last_hash FROM {head} WHERE source = %s{lock}",  # noqa: S608
        update_head=f"UPDATE {head} SET last_sequence = %s, last_hash = %s WHERE source = %s",  # noqa: S608
        insert_event=insert(AuditEvent, _EVENT_COLUMNS),
        insert_delivery=insert(Delivery, _DELIVERY_COLUMNS),
    )
    setattr(_statements_by_thread, connection.vendor, statements)
    return statements


# Text and numbers go to the driver as they are; other types (UUID, datetime, JSON) are prepared
# by their field, as the ORM would. Calling the field for every value cost more than the insert.
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.FloatField)


def _prepared(fields, values: dict, connection) -> list:
    prepared = []
    for field in fields:
        value = values[field.attname] if field.attname in values else field.get_default()
        if value is None or isinstance(field, _PLAIN_FIELDS):
            prepared.append(value)
        else:
            prepared.append(field.get_db_prep_save(value, connection))
    return prepared


def _saved_event(row: dict) -> AuditEvent:
    event = AuditEvent(**row)
    event._state.adding = False
    event._state.db = DEFAULT_DB_ALIAS
    return event


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
