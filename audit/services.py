"""Writing audit events: appended to the chain in the caller's transaction, delivered after it."""

import functools
import logging
import time
from collections.abc import Iterable
from typing import NamedTuple

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.utils import timezone

from audit import merkle
from audit.chain import GENESIS_HASH, event_hash
from audit.models import AuditEvent, AuditTreeNode, ChainHead, uuid7
from core.redaction import redact_secrets
from core.tokens import keyed_fingerprint

logger = logging.getLogger("hyperbook.audit")

SOURCE = "hyperbook"
_EVENT_FIELDS = tuple(AuditEvent._meta.concrete_fields)
_EVENT_ATTNAMES = tuple(f.attname for f in _EVENT_FIELDS)
_EVENT_NAMES = frozenset(f.name for f in _EVENT_FIELDS)


def prompt_fingerprint(prompt: str) -> str:
    """A keyed hash of the prompt: equal prompts can be correlated, the text cannot be read back."""
    return keyed_fingerprint(prompt, context="prompt:")


def audit_events_append(*, events: Iterable[dict], source: str = SOURCE) -> list[AuditEvent]:
    """Append events to the source's chain, in order, in one transaction (the caller's, if any).

    Each dict holds AuditEvent field values (unknown keys are refused). The chain head's row is
    locked for the transaction (on SQLite the IMMEDIATE transaction serialises writers), so
    concurrent writers (threads, workers, hosts) never fork a chain or skip a sequence. Each event
    becomes the next leaf of the Merkle tree, and the nodes it completes are written with it
    (about two rows an event). The event is the outbox entry: the delivery worker gives it its
    delivery state after the commit.
    """
    events = list(events)
    for values in events:
        unknown = values.keys() - _EVENT_NAMES
        if unknown:
            raise ValueError(f"unknown audit fields: {sorted(unknown)}")
    if not events:
        return []
    # Three plain statements, not the ORM's queries: building those cost over 1 ms a transaction,
    # more than the database's own work, on the path of every /mcp request. The connection
    # itself, not the `connection` proxy, whose every attribute read is a lookup.
    connection = connections[DEFAULT_DB_ALIAS]
    sql = _sql(connection.vendor)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.lock_head, [source])
        head = cursor.fetchone()
        if head is None:
            ChainHead.objects.get_or_create(source=source, defaults={"last_hash": GENESIS_HASH})
            cursor.execute(sql.lock_head, [source])
            head = cursor.fetchone()
        last_sequence, last_hash, frontier_text = head
        rows = _chained(events, source, last_sequence, last_hash)
        cursor.executemany(sql.insert_event, [_parameters(row, connection) for row in rows])
        frontier, nodes = _planted(frontier_text, last_sequence, rows, source)
        cursor.executemany(sql.insert_node, nodes)
        cursor.execute(sql.move_head, [rows[-1]["sequence"], rows[-1]["hash"], frontier, source])
        last_sequence = rows[-1]["sequence"]
        transaction.on_commit(lambda: _queue_delivery(last_sequence))
    return [
        AuditEvent.from_db(connection.alias, _EVENT_ATTNAMES, [row[f] for f in _EVENT_ATTNAMES])
        for row in rows
    ]


class _Sql:
    """The append's statements; only quoted names from the models go in, values are parameters."""

    def __init__(self, connection):
        quote = connection.ops.quote_name
        head, events = quote(ChainHead._meta.db_table), quote(AuditEvent._meta.db_table)
        # SQLite has no row locks: its IMMEDIATE transaction already holds the write lock.
        lock = " FOR UPDATE" if connection.vendor != "sqlite" else ""
        self.lock_head = (
            f"SELECT last_sequence, last_hash, tree_frontier FROM {head} WHERE source = %s{lock}"  # noqa: S608
        )
        self.move_head = (
            f"UPDATE {head} SET last_sequence = %s, last_hash = %s, tree_frontier = %s "  # noqa: S608
            "WHERE source = %s"
        )
        nodes = quote(AuditTreeNode._meta.db_table)
        self.insert_node = (
            f"INSERT INTO {nodes} (source, level, {quote('index')}, hash) VALUES (%s, %s, %s, %s)"  # noqa: S608
        )
        columns = ", ".join(quote(f.column) for f in _EVENT_FIELDS)
        values = ", ".join(["%s"] * len(_EVENT_FIELDS))
        self.insert_event = f"INSERT INTO {events} ({columns}) VALUES ({values})"  # noqa: S608


@functools.cache
def _sql(vendor: str) -> _Sql:
    return _Sql(connections[DEFAULT_DB_ALIAS])


# Text and numbers reach the driver as they are (their fields' preparation would return them
# unchanged, at a cost larger than the insert's); ids, times and JSON are prepared by their own
# field for this database.
_PLAIN = (models.CharField, models.TextField, models.IntegerField, models.FloatField)
_PREPARED = tuple((f.attname, None if isinstance(f, _PLAIN) else f) for f in _EVENT_FIELDS)
# What an event not given a field holds: its default (a fresh list or dict where it is one).
_MADE = {f.attname for f in _EVENT_FIELDS if f.has_default() and callable(f.default)}
_DEFAULTS = {f.attname: f.get_default() for f in _EVENT_FIELDS if f.attname not in _MADE}
_FRESH_DEFAULTS = tuple(
    (f.attname, f.default) for f in _EVENT_FIELDS if f.attname in _MADE - {"id"}
)
# Text is fitted to its column here, for every caller, before the event is hashed: the row
# stored and the hash over it then agree, whatever length a caller or a client sent.
_FITTED_LENGTHS = tuple(
    (f.attname, f.max_length)
    for f in _EVENT_FIELDS
    if isinstance(f, models.CharField) and f.max_length is not None
)


def _parameters(row: dict, connection) -> list:
    return [
        row[name] if field is None else field.get_db_prep_save(row[name], connection)
        for name, field in _PREPARED
    ]


def _chained(events: list[dict], source: str, sequence: int, prev_hash: str) -> list[dict]:
    """The events as complete rows, numbered and hashed onto the head (sequence, prev_hash)."""
    now = timezone.now()
    rows = []
    for values in events:
        sequence += 1
        row = {**_DEFAULTS, **{name: make() for name, make in _FRESH_DEFAULTS}, **values}
        row.update(
            id=values.get("id") or uuid7(),
            source=source,
            sequence=sequence,
            occurred_at=values.get("occurred_at") or now,
            prev_hash=prev_hash,
        )
        _fit_to_columns(row)
        row["hash"] = prev_hash = event_hash(row)
        rows.append(row)
    return rows


def _planted(
    frontier_text: str, size: int, rows: list[dict], source: str
) -> tuple[str, list[tuple]]:
    """The tree grown by the rows' hashes: its new frontier (as stored) and the nodes completed."""
    frontier = merkle.frontier_from_hex(frontier_text)
    if len(frontier) != size.bit_count():
        # Only a process that appends without growing the tree (an older hyperbook sharing this
        # database) leaves it so; growing on would sign roots over a tree the log is not.
        raise RuntimeError(
            f"audit tree for {source}: its edge holds {len(frontier)} subtrees, but a log of "
            f"{size} events has {size.bit_count()}: events were appended without the tree"
        )
    nodes = []
    for row in rows:
        leaf = merkle.leaf_hash(bytes.fromhex(row["hash"]))
        for level, index, value in merkle.frontier_append(frontier, size, leaf):
            nodes.append((source, level, index, value.hex()))
        size += 1
    return merkle.frontier_hex(frontier), nodes


def _fit_to_columns(row: dict) -> None:
    for name, max_length in _FITTED_LENGTHS:
        value = row[name]
        if isinstance(value, str) and len(value) > max_length:
            row[name] = value[:max_length]
    if row["latency_ms"] is not None:
        # The hash covers three decimals (audit.chain): the stored value is exactly what it
        # covers, so no digit of it can change unseen.
        row["latency_ms"] = round(float(row["latency_ms"]), 3)


def audit_record(**values) -> AuditEvent:
    """Record one event (an admin or service change) in the caller's transaction."""
    return audit_events_append(events=[values])[0]


def audit_change(
    *, action: AuditEvent.Action, actor, target: str, before: dict | None, after: dict | None
):
    """An admin/service change with a before/after of its non-secret fields."""
    return audit_record(
        action=AuditEvent.Action(action),  # a ValueError for an action nobody declared
        outcome=AuditEvent.Outcome.CHANGED,
        actor=getattr(actor, "get_username", lambda: "")() if actor is not None else "system",
        target=target,
        changes={"before": before, "after": after},
    )


def revoke_once(
    row: models.Model, *, action: AuditEvent.Action, actor, target: str, snapshot, **revoked
) -> bool:
    """Revoke `row` (a model with `revoked_at`) unless it already is, and audit that once.

    A second revoke changes nothing and writes no event, so the first one's fields (a reason, who)
    stay. `snapshot(row)` gives the non-secret fields the event records before and after;
    `revoked` are further fields set with `revoked_at`. Returns whether this call revoked it."""
    with transaction.atomic():
        before = snapshot(row)
        updated = (
            type(row)
            ._default_manager.filter(pk=row.pk, revoked_at__isnull=True)
            .update(revoked_at=timezone.now(), **revoked)
        )
        row.refresh_from_db()
        if updated:
            audit_change(
                action=action, actor=actor, target=target, before=before, after=snapshot(row)
            )
    return bool(updated)


def _no_follow_up(last_sequence: int) -> None:
    return None


# What an append asks for once it commits: audit.apps sets it to audit.tasks.after_append (ask a
# worker to deliver, and to sign a checkpoint when due), so the append path imports no task module
# and the tasks, which use the checkpoints, which append, form no circle.
after_append_committed = _no_follow_up


def _queue_delivery(last_sequence: int) -> None:
    after_append_committed(last_sequence)


# --- what anyone can cause ------------------------------------------------------------------


def client_text(value, limit: int = 128) -> str:
    """What a client sent, fit for a column: nothing shaped like a secret (a token pasted into a
    User-Agent stays out of the log), no NUL, no lone surrogate, cut to `limit`."""
    text = redact_secrets(str(value or ""))[:limit].replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def request_origin(meta) -> dict[str, str]:
    """Where a request came from, as an event records it: the address and the User-Agent from a
    Django request's META (oauthlib's request headers are the same mapping), fitted and redacted."""
    return {
        "client_address": client_text(meta.get("REMOTE_ADDR", ""), 64),
        "user_agent": client_text(meta.get("HTTP_USER_AGENT", ""), 256),
    }


class BudgetAdmission(NamedTuple):
    record: bool  # record this event
    first_past: bool  # it is the first past the budget: say so, and that the rest go unrecorded


def refusal_budget_admit(*, kind: str, address: str) -> BudgetAdmission:
    """Events anyone can cause without holding anything (a refused token request, a failed login)
    are recorded one by one up to AUDIT_REFUSALS_PER_ADDRESS per address, kind and window of
    AUDIT_REFUSAL_WINDOW_SECONDS; one more says the budget was reached, and the rest of the window
    is not recorded. Counted in Django's cache."""
    window = settings.AUDIT_REFUSAL_WINDOW_SECONDS
    key = f"audit:budget:{kind}:{address or 'unknown'}:{int(time.time() // window)}"
    cache.add(key, 0, timeout=window * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        count = 1
    limit = settings.AUDIT_REFUSALS_PER_ADDRESS
    return BudgetAdmission(record=count <= limit + 1, first_past=count == limit + 1)
