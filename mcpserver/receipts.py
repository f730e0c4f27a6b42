"""Receipts on /mcp: every `tools/call` result names its audit event in `_meta`, and the caller
fetches the event's proof with its own bearer at `GET /mcp/receipts/<event id>`.

The `_meta` entry is written into the result after the event is committed (the gate holds every
response until then), so it can carry the event's sequence as well as its id:

    "_meta": {"io.hyperbook/audit": {"event_id": "…", "sequence": 42,
                                     "receipt": "https://kb.example.com/mcp/receipts/…"}}

The receipt itself (audit.receipts) answers 200 with the proof bundle (JSON Lines, for `python -m
audit.verify`); 404 to anyone but the delegation that made the call, or for no such call; 409
with Retry-After while no (cosigned) checkpoint covers the event yet.
"""

import orjson
from django.conf import settings

from audit.models import AuditEvent
from audit.proofs import ProofError
from audit.receipts import ReceiptPending, ReceiptUnknown, call_receipt
from audit.writer import Appended
from mcpserver.http import json_reply
from mcpserver.principals import Principal
from mcpserver.records import RequestRecord
from mcpserver.threads import in_db_thread

RECEIPT_PATH = "/mcp/receipts/"
META_KEY = "io.hyperbook/audit"  # MCP `_meta` keys carry a reverse-DNS prefix of their owner


def is_receipt_path(path: str) -> bool:
    return path.startswith(RECEIPT_PATH) and len(path) > len(RECEIPT_PATH)


def with_receipt(held: list[dict], appended: Appended, *, self_url: str) -> None:
    """Name the call's audit event in the held JSON-RPC result's `_meta` (and fix the length).
    A response that is not one JSON-RPC result (an error, a stream) is left as it is."""
    bodies = [m for m in held if m["type"] == "http.response.body"]
    try:
        response = orjson.loads(b"".join(m.get("body", b"") for m in bodies))
    except orjson.JSONDecodeError:
        return
    result = response.get("result") if isinstance(response, dict) else None
    if not isinstance(result, dict):
        return
    meta = result.setdefault("_meta", {})
    if not isinstance(meta, dict):
        return
    meta[META_KEY] = {
        "event_id": appended.event_id,
        "sequence": appended.sequence,
        "receipt": f"{self_url.rstrip('/')}/receipts/{appended.event_id}",
    }
    payload = orjson.dumps(response)
    for message in bodies:
        message["body"], message["more_body"] = b"", False
    bodies[-1]["body"] = payload
    start = held[0]
    start["headers"] = [
        (name, str(len(payload)).encode() if name.lower() == b"content-length" else value)
        for name, value in start["headers"]
    ]


def _receipt_lines(event_id: str, delegation_id: int) -> bytes:
    return b"".join(
        orjson.dumps(line) + b"\n"
        for line in call_receipt(event_id=event_id, delegation_id=delegation_id)
    )


_receipt_in_db_thread = in_db_thread(_receipt_lines)


async def serve_receipt(scope, send, principal: Principal, record: RequestRecord) -> None:
    """Answer GET /mcp/receipts/<event id> for the authenticated caller."""
    event_id = scope["path"][len(RECEIPT_PATH) :].strip("/")[:64]
    Reason = AuditEvent.Reason
    try:
        body = await _receipt_in_db_thread(event_id, principal.delegation_id)
    except ReceiptUnknown:
        record.outcome, record.reason = AuditEvent.Outcome.FORBIDDEN, Reason.RECEIPT_UNKNOWN
        return await json_reply(send, 404, {"error": "no such call of this delegation's"})
    except (ReceiptPending, ProofError):
        record.outcome, record.reason = AuditEvent.Outcome.ALLOWED, Reason.RECEIPT_PENDING
        wait = str(settings.AUDIT_CHECKPOINT_SECONDS).encode()
        return await json_reply(
            send,
            409,
            {"error": "not yet covered by a signed checkpoint; ask again later"},
            [(b"retry-after", wait)],
        )
    record.outcome = AuditEvent.Outcome.ALLOWED
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/x-ndjson"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
