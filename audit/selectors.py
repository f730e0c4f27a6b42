"""Reads for auditors: filtered event lists that stay fast on millions of rows."""

import re
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from audit.models import AuditEvent, ChainVerification, Delivery, DeliveryAlarm, WitnessState

TIME_RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
# What a client request id is made of as the /mcp gate keeps it, and so a console exchange id.
EXCHANGE_ID_RE = re.compile(r"[A-Za-z0-9._:~-]{1,64}")


def events_in_sequence(
    *, source: str, fields, after: int = 0, through: int | None = None, chunk: int = 5000
):
    """The source's events after `after` (through `through`), as dicts of `fields`, in sequence
    order, read a chunk at a time: constant memory over any number of events."""
    events = AuditEvent.objects.filter(source=source)
    if through is not None:
        events = events.filter(sequence__lte=through)
    while True:
        rows = list(events.filter(sequence__gt=after).order_by("sequence").values(*fields)[:chunk])
        if not rows:
            return
        yield from rows
        after = rows[-1]["sequence"]


def audit_events_visible():
    return AuditEvent.objects.select_related("delivery")


def event_delivery(event: AuditEvent) -> Delivery:
    """The event's delivery state; an event the worker has not queued yet is pending, untried."""
    delivery = getattr(event, "delivery", None)
    return (
        delivery if delivery is not None else Delivery(event_id=event.pk, sequence=event.sequence)
    )


def with_delivery_state(queryset, state: str):
    if state == Delivery.State.PENDING:
        # Not queued by the worker yet (no delivery row) counts as pending too.
        return queryset.filter(Q(delivery__state=state) | Q(delivery__isnull=True))
    return queryset.filter(delivery__state=state)


def chain_status() -> ChainVerification | None:
    """The latest chain check that has a result."""
    return (
        ChainVerification.objects.filter(state=ChainVerification.State.DONE, ok__isnull=False)
        .order_by("-checked_at")
        .first()
    )


def latest_checkpoint(source: str = "hyperbook"):
    from audit.models import AuditCheckpoint

    return (
        AuditCheckpoint.objects.filter(source=source)
        .select_related("delivery")
        .order_by("-number")
        .first()
    )


def open_alarms():
    return DeliveryAlarm.objects.filter(cleared_at__isnull=True)


def since(range_key: str):
    if range_key == "today":  # since local midnight
        return timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    delta = TIME_RANGES.get(range_key)
    return timezone.now() - delta if delta else None


def audit_backlog() -> tuple[int, datetime | None]:
    """(undelivered events, when the oldest of them happened): events not queued for delivery
    yet plus queued ones still pending. Reads a few rows and one partial index, never the table."""
    from audit.models import ChainHead, DeliveryCursor

    queued_to = dict(DeliveryCursor.objects.values_list("source", "queued_sequence"))
    pending = Delivery.objects.filter(state=Delivery.State.PENDING)
    count = pending.count()
    oldest = pending.order_by("sequence").values_list("event__occurred_at", flat=True).first()
    for source, last in ChainHead.objects.values_list("source", "last_sequence"):
        unqueued = last - queued_to.get(source, 0)
        if unqueued <= 0:
            continue
        count += unqueued
        first = (
            AuditEvent.objects.filter(source=source, sequence=queued_to.get(source, 0) + 1)
            .values_list("occurred_at", flat=True)
            .first()
        )
        if first is not None and (oldest is None or first < oldest):
            oldest = first
    return count, oldest


def signing_keys() -> list[dict]:
    """Every key that has signed a checkpoint (public halves), newest first, with whether it is
    the current signer's and whether this deployment still trusts it (AUDIT_VERIFIER_KEYS)."""
    from audit.checkpoints import configured_verifiers
    from audit.models import SigningKey

    verifiers = configured_verifiers()
    current, trusted = verifiers[0], {verifier.text() for verifier in verifiers}
    listed = [
        {
            "verifier_key": key.verifier_key,
            "key_id": key.key_id,
            "name": key.name,
            "first_used_at": key.first_used_at,
            "retired_at": key.retired_at,
            "last_size": key.last_size,
            "pk": key.pk,
        }
        for key in SigningKey.objects.all()
    ]
    if current.text() not in {key["verifier_key"] for key in listed}:  # it has not signed yet
        listed.insert(
            0,
            {
                "verifier_key": current.text(),
                "key_id": f"{current.key_id:08x}",
                "name": current.name,
                "first_used_at": None,
                "retired_at": None,
                "last_size": None,
                "pk": None,
            },
        )
    for key in listed:
        key["current"] = key["verifier_key"] == current.text()
        key["trusted"] = key["verifier_key"] in trusted
        # What `python -m audit.verify --public-key` should be given for it.
        size = key["last_size"]
        key["verifier_key_with_range"] = f"{key['verifier_key']}" + (
            "" if size is None else f"@{size}"
        )
    return listed


# Columns whose distinct values the auditors' filters list; each leads an index.
_LISTED_COLUMNS = {"stakeholder_id", "tool"}


def values_seen(column: str, *, limit: int = 200) -> list[str]:
    """The distinct non-blank values of `column` among all events, in order: what the events say,
    so a deleted stakeholder's or a removed tool's events stay findable. A loose index scan, one
    index seek per value (a plain DISTINCT would read the whole index on every page view)."""
    if column not in _LISTED_COLUMNS:
        raise ValueError(f"not a listed column: {column}")
    table, column = (connection.ops.quote_name(n) for n in (AuditEvent._meta.db_table, column))
    # Quoted names from the fixed set above; the limit is a parameter.
    sql = (
        f"WITH RECURSIVE seen(value) AS ("  # noqa: S608
        f"SELECT MIN({column}) FROM {table} WHERE {column} > '' "
        f"UNION ALL SELECT (SELECT MIN({column}) FROM {table} WHERE {column} > seen.value) "
        f"FROM seen WHERE seen.value IS NOT NULL) "
        f"SELECT value FROM seen WHERE value IS NOT NULL LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [value for (value,) in cursor.fetchall()]


def witness_states():
    """Each configured witness with what it has cosigned for us (a witness not yet asked shows
    size 0), in the order AUDIT_WITNESSES lists them."""
    from audit.witnesses import configured_witnesses  # it reads the tree, which reads us

    known = {state.verifier_key: state for state in WitnessState.objects.all()}
    return [
        known.get(w.key) or WitnessState(verifier_key=w.key, name=w.verifier.name, url=w.url)
        for w in configured_witnesses()
    ]


def witnessing(latest) -> dict | None:
    """Whether the latest checkpoint is witnessed, and how many tree checkpoints are not; None
    when no witness is configured."""
    from audit.witnesses import configured_witnesses, is_witnessed, unwitnessed_checkpoints

    if latest is None or not configured_witnesses():
        return None
    return {
        "latest": is_witnessed(latest),
        "unwitnessed": unwitnessed_checkpoints(latest.source).count(),
    }


def is_exchange_id(value: str) -> bool:
    """Whether `value` (from a URL) can be an exchange id: anything else matches no event."""
    return bool(EXCHANGE_ID_RE.fullmatch(value))


def exchange_events(queryset, *, exchange_id: str):
    """The events of one exchange: every request that carried its id, and its own event
    (indexed); none for text that is no exchange id."""
    if not is_exchange_id(exchange_id):
        return queryset.none()
    return queryset.filter(client_request_id=exchange_id)
