"""Writing audit events: appended to the chain in the caller's transaction, delivered after it."""

import hashlib
import hmac
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import orjson
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, event_hash
from audit.models import AuditEvent, ChainHead, uuid7

logger = logging.getLogger("hyperbook.audit")

SOURCE = "hyperbook"
_EVENT_FIELDS = {f.name for f in AuditEvent._meta.concrete_fields}


def prompt_fingerprint(prompt: str) -> str:
    """A keyed hash of the prompt: equal prompts can be correlated, the text cannot be read back."""
    key = settings.TOKEN_FINGERPRINT_KEY.encode()
    return hmac.new(key, b"prompt:" + prompt.encode(), hashlib.sha256).hexdigest()


def audit_events_append(
    *, events: Iterable[dict], source: str = SOURCE, return_events: bool = True
) -> list[AuditEvent]:
    """Append events to the source's chain, in order, in one transaction.

    Each dict holds AuditEvent field values (unknown keys are refused). Appends are serialised on
    the chain head, so concurrent writers (threads, workers, hosts) never fork a chain: its row is
    locked for the transaction, or (PostgreSQL, outside a transaction) one statement moves it on
    only from where this process last left it. Every /mcp request comes through here, so the
    statements are built once per thread and run directly (values still pass through the
    backend's own adapters, as the ORM's would). The event is the outbox entry: the delivery
    worker gives it its delivery state later.
    """
    events = list(events)
    if not events:
        return []
    for values in events:
        unknown = values.keys() - _EVENT_FIELDS
        if unknown:
            raise ValueError(f"unknown audit fields: {sorted(unknown)}")
    connection = connections[DEFAULT_DB_ALIAS]
    statements = _statements(connection)
    rows = None
    if not connection.in_atomic_block and statements.append_if_head is not None:
        rows = _append_if_head_unmoved(connection, statements, events, source)
    elif not connection.in_atomic_block and connection.vendor == "sqlite":
        rows = _append_sqlite(connection, statements, events, source)
    if rows is None:
        rows = _append_locked(connection, statements, events, source)
    return [_saved_event(row) for row in rows] if return_events else []


def _append_locked(connection, statements, events: list[dict], source: str) -> list[dict]:
    with transaction.atomic(using=connection.alias):
        with connection.cursor() as cursor:
            rows = _extend_chain(cursor, statements, statements.orm, events, source)
            if rows is None:
                ChainHead.objects.get_or_create(source=source, defaults={"last_hash": GENESIS_HASH})
                rows = _extend_chain(cursor, statements, statements.orm, events, source)
        head = (rows[-1]["sequence"], rows[-1]["hash"])
        transaction.on_commit(_queue_delivery)
        transaction.on_commit(partial(_remember_head, connection.alias, source, head))
    return rows


def _append_sqlite(connection, statements, events: list[dict], source: str):
    """SQLite, outside a transaction: the locking path's statements on the driver's connection.

    The same transaction (BEGIN IMMEDIATE serialises writers) without the ORM's per-statement
    wrapping, which costs as much as the statements themselves here. Returns None when the chain
    has no head yet (the locking path creates it)."""
    connection.ensure_connection()
    raw = connection.connection
    raw.execute("BEGIN IMMEDIATE")
    try:
        rows = _extend_chain(raw.cursor(), statements, statements.driver, events, source)
        raw.execute("ROLLBACK" if rows is None else "COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    if rows is not None:
        _queue_delivery()
    return rows


def _extend_chain(cursor, statements, sql: "_ChainSql", events: list[dict], source: str):
    """Read the head, insert the chained rows, move the head (in the caller's transaction).

    Returns the rows, or None when the source has no chain head yet."""
    cursor.execute(sql.head, [source])
    found = cursor.fetchone()
    if found is None:
        return None
    rows = _chained_rows(events, source, *found)
    cursor.executemany(sql.insert_event, [statements.parameters(row) for row in rows])
    cursor.execute(sql.update_head, [rows[-1]["sequence"], rows[-1]["hash"], source])
    return rows


def _append_if_head_unmoved(connection, statements, events: list[dict], source: str):
    """PostgreSQL, outside a transaction: one statement, so one round trip and one commit.

    Chains onto the head this process last wrote; the statement moves the head only if it is still
    there and inserts the events only if it moved. If another writer appended meanwhile, nothing
    is written and the caller takes the locking path. Returns the rows, or None."""
    known = _known_heads.get((connection.alias, source))
    if known is None:
        return None
    rows = _chained_rows(events, source, *known)
    head = (rows[-1]["sequence"], rows[-1]["hash"])
    # The batch travels as one JSON document (uuids and datetimes in their ISO forms), so the
    # statement is the same text whatever the batch size.
    document = orjson.dumps([{name: row[name] for name in _EVENT_NAMES} for row in rows])
    with connection.cursor() as cursor:
        cursor.execute(statements.append_if_head, [*head, source, *known, document.decode()])
        inserted = cursor.rowcount
    if inserted != len(rows):
        _known_heads.pop((connection.alias, source), None)
        return None
    _remember_head(connection.alias, source, head)
    _queue_delivery()
    return rows


def _chained_rows(events: list[dict], source: str, sequence: int, prev_hash: str) -> list[dict]:
    now = timezone.now()
    rows = []
    for values in events:
        sequence += 1
        row = {
            **_EVENT_DEFAULTS,
            "masked_columns": [],
            "changes": {},
            **values,
            "id": values.get("id") or uuid7(),
            "source": source,
            "sequence": sequence,
            "occurred_at": values.get("occurred_at") or now,
            "prev_hash": prev_hash,
        }
        row["hash"] = prev_hash = event_hash(row)
        rows.append(row)
    return rows


# (database alias, source) -> (sequence, hash) this process last committed: a hint for the
# single-statement path, never trusted (the statement checks it against the database).
_known_heads: dict[tuple[str, str], tuple[int, str]] = {}


def _remember_head(alias: str, source: str, head: tuple[int, str]) -> None:
    _known_heads[(alias, source)] = head


@dataclass(frozen=True)
class _ChainSql:
    head: str
    insert_event: str
    update_head: str

    def in_qmark_style(self) -> "_ChainSql":
        return _ChainSql(
            *(sql.replace("%s", "?") for sql in (self.head, self.insert_event, self.update_head))
        )


@dataclass(frozen=True)
class _Statements:
    orm: _ChainSql  # through Django's cursor
    driver: _ChainSql  # the same on the sqlite3 driver's connection (its placeholder style)
    columns: tuple[tuple[str, Callable | None], ...]  # (row key, None or the field's preparation)
    append_if_head: str | None  # PostgreSQL only

    def parameters(self, row: dict) -> list:
        return [row[name] if adapt is None else adapt(row[name]) for name, adapt in self.columns]


_EVENT_COLUMNS = tuple(AuditEvent._meta.concrete_fields)
_EVENT_NAMES = tuple(f.attname for f in _EVENT_COLUMNS)
_statements_by_thread = threading.local()


def _statements(connection) -> _Statements:
    # Only model metadata and quoted names go into this SQL; every value is a bound parameter.
    cached = getattr(_statements_by_thread, connection.vendor, None)
    if cached is not None:
        return cached
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in _EVENT_COLUMNS)
    head = quote(ChainHead._meta.db_table)
    # SQLite has no row locks; its IMMEDIATE transactions already serialise writers.
    lock = "" if connection.vendor == "sqlite" else " FOR UPDATE"
    select_head = f"SELECT last_sequence, last_hash FROM {head} WHERE source = %s{lock}"  # noqa: S608
    update_head = f"UPDATE {head} SET last_sequence = %s, last_hash = %s WHERE source = %s"  # noqa: S608
    insert_event = (
        f"INSERT INTO {quote(AuditEvent._meta.db_table)} ({columns}) "  # noqa: S608
        f"VALUES ({', '.join(['%s'] * len(_EVENT_COLUMNS))})"
    )
    orm = _ChainSql(head=select_head, insert_event=insert_event, update_head=update_head)
    statements = _Statements(
        orm=orm,
        driver=orm.in_qmark_style(),
        columns=tuple((f.attname, _adapter(f, connection)) for f in _EVENT_COLUMNS),
        append_if_head=_append_if_head_sql(connection, head, columns),
    )
    setattr(_statements_by_thread, connection.vendor, statements)
    return statements


def _append_if_head_sql(connection, head: str, columns: str) -> str | None:
    if connection.vendor != "postgresql":
        return None  # SQLite's statements are in-process calls: nothing to save
    quote = connection.ops.quote_name
    record = ", ".join(f"{quote(f.column)} {f.db_type(connection)}" for f in _EVENT_COLUMNS)
    return (
        "WITH moved AS ("  # noqa: S608 - quoted names only; values are bound parameters
        f"UPDATE {head} SET last_sequence = %s, last_hash = %s "
        "WHERE source = %s AND last_sequence = %s AND last_hash = %s RETURNING 1) "
        f"INSERT INTO {quote(AuditEvent._meta.db_table)} ({columns}) "
        f"SELECT {columns} FROM jsonb_to_recordset(%s::jsonb) AS appended({record}) "
        "WHERE EXISTS (SELECT 1 FROM moved)"
    )


# Text and numbers go to the driver as they are; UUIDs, datetimes and JSON are adapted by the
# backend's own adapters, as the ORM's field preparation ends up doing (its checks around them cost
# more than the insert). Nothing else is in the table.
_PLAIN_FIELDS = (models.CharField, models.TextField, models.IntegerField, models.FloatField)


def _adapter(field, connection):
    if isinstance(field, _PLAIN_FIELDS):
        return None
    operations = connection.ops
    if isinstance(field, models.UUIDField):
        if connection.features.has_native_uuid_field:
            return None
        return lambda value: None if value is None else value.hex
    if isinstance(field, models.DateTimeField):
        return operations.adapt_datetimefield_value
    if isinstance(field, models.JSONField):
        return lambda value: operations.adapt_json_value(value, field.encoder)
    raise TypeError(f"no adapter for {type(field).__name__} ({field.name})")


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


# Every column has a value in the row: blank text, or NULL where the field allows it.
_EVENT_DEFAULTS = {
    **{f.attname: None for f in AuditEvent._meta.concrete_fields if f.null},
    **dict.fromkeys(_BLANK_TEXT, ""),
}


def _queue_delivery() -> None:
    # Imported here: the task module imports Celery, which services otherwise need not load.
    from audit.tasks import request_delivery

    request_delivery()
