"""Exports that keep the proof: events with their chain fields, and the checkpoints covering them.

JSON Lines, one object a line, written as they are read (constant memory for any number of
events):

1. a header: `{"type": "hyperbook.audit_export", "version": 1, ...}` (informational only);
2. the events in sequence order, each with every hashed field, `client_request_id` and `hash`,
   so that `audit.chain.event_hash` recomputes its hash;
3. the signed checkpoints whose sequence lies in the range, each with its C2SP signed note.

So that `python -m audit.verify` can prove the whole range, a JSONL export is widened to the
nearest checkpoints: it starts at event #1 or right after a checkpoint in the file, and it ends at
a checkpoint (one is signed now when the range reaches past the latest). OCSF exports (API
Activity, class 6003) keep exactly the asked range, with the event's chain fields in `unmapped`.
"""

import base64
import datetime as dt
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from django.db.models import Max, Min
from django.utils import timezone

from audit.chain import HASHED_FIELDS, OPTIONAL_HASHED_FIELDS, occurred_at_text
from audit.checkpoints import checkpoint_create_if_due, origin_for
from audit.models import AuditCheckpoint, AuditEvent
from audit.selectors import events_in_sequence
from audit.services import SOURCE
from audit.tree import inclusion_proof

EXPORT_TYPE = "hyperbook.audit_export"
EXPORT_VERSION = 1
EVENT_FIELDS = (*HASHED_FIELDS, *OPTIONAL_HASHED_FIELDS, "hash")
CHUNK = 2000
OCSF_VERSION = "1.3.0"


class ExportError(ValueError):
    pass


@dataclass(frozen=True)
class ExportRange:
    first: int  # sequences, inclusive; first > last when there is nothing to export
    last: int


def requested_range(
    *,
    source: str = SOURCE,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    after_sequence: int | None = None,
) -> ExportRange:
    """The sequences of the events asked for: from the first at or after `since` (and after
    `after_sequence`) to the last before `until`."""
    events = AuditEvent.objects.filter(source=source)
    if after_sequence is not None:
        events = events.filter(sequence__gt=after_sequence)
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if until is not None:
        events = events.filter(occurred_at__lt=until)
    bounds = events.aggregate(first=Min("sequence"), last=Max("sequence"))
    if bounds["first"] is None:
        return ExportRange(1, 0)
    return ExportRange(bounds["first"], bounds["last"])


def provable_range(wanted: ExportRange, *, source: str = SOURCE) -> ExportRange:
    """`wanted`, widened to start after a checkpoint (or at #1) and end at one; a checkpoint is
    signed now when none covers its last event yet."""
    if wanted.first > wanted.last:
        return wanted
    checkpoints = AuditCheckpoint.objects.filter(source=source)
    before = (
        checkpoints.filter(sequence__lt=wanted.first)
        .order_by("-sequence")
        .values_list("sequence", flat=True)
        .first()
    )
    end = (
        checkpoints.filter(sequence__gte=wanted.last)
        .order_by("sequence")
        .values_list("sequence", flat=True)
        .first()
    )
    if end is None:
        signed = checkpoint_create_if_due(source=source, force=True)
        if signed is None or signed.sequence < wanted.last:
            raise ExportError("no checkpoint covers the last event, and none could be signed")
        end = signed.sequence
    return ExportRange((before or 0) + 1, end)


def event_record(row: dict) -> dict:
    """An event as exported: every field its hash covers, in their exported forms, and the hash."""
    record: dict[str, Any] = {name: row.get(name) for name in EVENT_FIELDS}
    record["id"] = str(record["id"])
    record["occurred_at"] = occurred_at_text(record["occurred_at"])
    return record


def checkpoint_record(checkpoint: AuditCheckpoint) -> dict:
    """A checkpoint as exported. One signed over the tree carries the chain's hash at its size
    and that hash's inclusion proof as the tree's last leaf, so a verifier holding the events but
    not the tree can tie the chain to the signed root."""
    record = {
        "type": "audit_checkpoint",
        "number": checkpoint.number,
        "source": checkpoint.source,
        "sequence": checkpoint.sequence,
        "hash": checkpoint.hash,
        "key_id": checkpoint.key_id,
        "created_at": occurred_at_text(checkpoint.created_at),
        "note": checkpoint.witnessed_note(),
    }
    if checkpoint.head_hash is not None:
        size = checkpoint.sequence
        record["head_hash"] = checkpoint.head_hash
        record["head_proof"] = encoded(inclusion_proof(checkpoint.source, size, size))
    return record


def encoded(hashes: list[bytes]) -> list[str]:
    return [base64.b64encode(value).decode() for value in hashes]


def _event_rows(source: str, span: ExportRange) -> Iterator[dict]:
    return events_in_sequence(
        source=source, fields=EVENT_FIELDS, after=span.first - 1, through=span.last, chunk=CHUNK
    )


def jsonl_records(span: ExportRange, *, source: str = SOURCE) -> Iterator[dict]:
    """The export's lines as records, read as they are yielded: the header, the events of `span`,
    then the checkpoints in it."""
    yield {
        "type": EXPORT_TYPE,
        "version": EXPORT_VERSION,
        "source": source,
        "origin": origin_for(source),
        "exported_at": occurred_at_text(timezone.now()),
        "first_sequence": span.first,
        "last_sequence": span.last,
        "events": max(span.last - span.first + 1, 0),
    }
    for row in _event_rows(source, span):
        yield {"type": "audit_event", **event_record(row)}
    checkpoints = AuditCheckpoint.objects.filter(
        source=source, sequence__gte=span.first - 1, sequence__lte=span.last
    ).order_by("number")
    for checkpoint in checkpoints.iterator():
        yield checkpoint_record(checkpoint)


def export_jsonl(out, span: ExportRange, *, source: str = SOURCE) -> int:
    """Write the events of `span` and the checkpoints in it; returns how many events."""
    written = 0
    for record in jsonl_records(span, source=source):
        _write(out, record)
        written += record["type"] == "audit_event"
    return written


def export_ocsf(out, span: ExportRange, *, source: str = SOURCE) -> int:
    written = 0
    for row in _event_rows(source, span):
        _write(out, ocsf_event(event_record(row)))
        written += 1
    return written


def _write(out, value: dict) -> None:
    out.write(orjson.dumps(value).decode() + "\n")


# OCSF API Activity's activity ids, by the verb an action ends with.
_ACTIVITIES = {
    "created": (1, "Create"),
    "issued": (1, "Create"),
    "registered": (1, "Create"),
    "updated": (3, "Update"),
    "changed": (3, "Update"),
    "pinned": (3, "Update"),
    "approved": (3, "Update"),
    "quarantined": (3, "Update"),
    "deleted": (4, "Delete"),
    "revoked": (4, "Delete"),
}
_SUCCESSFUL = {AuditEvent.Outcome.ALLOWED, AuditEvent.Outcome.CHANGED, AuditEvent.Outcome.SUMMARY}


def ocsf_event(record: dict) -> dict:
    """One event as OCSF API Activity (class 6003); the event as exported, chain fields and all,
    stays in `unmapped` so that its hash can still be recomputed."""
    action = record["action"]
    verb = action.rsplit("_", 1)[-1]
    activity_id, activity = _ACTIVITIES.get(
        verb, (2, "Read") if action.startswith("mcp.") else (99, "Other")
    )
    outcome = record["outcome"]
    successful = outcome in _SUCCESSFUL
    declined = outcome == AuditEvent.Outcome.NOT_OFFERED  # a probe the protocol allows: no failure
    severity_id = 1 if successful or declined else (4 if outcome == AuditEvent.Outcome.ERROR else 2)
    status_id, status = (
        (1, "Success") if successful else (99, "Other") if declined else (2, "Failure")
    )
    moment = dt.datetime.strptime(record["occurred_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=dt.UTC
    )
    user = {"name": record["actor"]} if record["actor"] else {}
    if record["stakeholder_id"]:
        user = {"uid": record["stakeholder_id"], "type": record["stakeholder_role"], **user}
    event = {
        "class_uid": 6003,
        "class_name": "API Activity",
        "category_uid": 6,
        "category_name": "Application Activity",
        "activity_id": activity_id,
        "activity_name": activity,
        "type_uid": 6003 * 100 + activity_id,
        "type_name": f"API Activity: {activity}",
        "time": int(moment.timestamp() * 1000),
        "severity_id": severity_id,
        "status_id": status_id,
        "status": status,
        "status_detail": record["detail"] or outcome,
        "api": {
            "operation": action,
            "request": {"uid": record["request_id"] or record["id"]},
            "service": {"name": record["tool"] or "hyperbook"},
        },
        "actor": {"user": user} if user else {"app_name": "hyperbook"},
        "src_endpoint": _endpoint(record["client_address"]),
        "metadata": {
            "version": OCSF_VERSION,
            "uid": record["id"],
            "log_name": record["source"],
            "sequence": record["sequence"],
            "product": {"name": "hyperbook", "vendor_name": "hyperbook"},
        },
        "unmapped": record,
    }
    if record["http_status"] is not None:
        event["status_code"] = str(record["http_status"])
    if record["latency_ms"] is not None:
        event["duration"] = round(record["latency_ms"])
    if record["user_agent"]:
        event["http_request"] = {"user_agent": record["user_agent"]}
    return event


def _endpoint(address: str) -> dict:
    try:
        return {"ip": str(ipaddress.ip_address(address))}
    except ValueError:
        return {"name": address} if address else {}
