"""The gate never answers a request whose audit event could not be written (it fails closed)."""

import json

import anyio

from mcpserver.gate import McpGate
from mcpserver.ratelimit import RateLimits


class Auditor:
    def __init__(self, fail: bool):
        self.fail = fail
        self.records = []

    async def completed(self, record):
        self.records.append(record)
        if self.fail:
            raise RuntimeError("the audit database is unavailable")


def gate(auditor) -> McpGate:
    async def never_reached(scope, receive, send):
        raise AssertionError("no tool code runs for an unauthenticated request")

    return McpGate(
        never_reached,
        allowed_hosts=["localhost"],
        allowed_origins=[],
        resource_url="http://localhost/mcp",
        authorization_servers=[],
        max_body_bytes=1024,
        rate_limits=RateLimits(per_delegation="100/second", per_failed_client="100/second"),
        auditor=auditor,
    )


def post_without_token(app) -> tuple[int, dict, dict]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1234),
    }
    anyio.run(app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), json.loads(body)


def test_an_answer_leaves_only_once_its_event_is_recorded():
    auditor = Auditor(fail=False)
    status, headers, _ = post_without_token(gate(auditor))
    assert status == 401
    assert [r.outcome for r in auditor.records] == ["unauthenticated"]
    assert headers[b"x-request-id"].decode() == auditor.records[0].request_id


def test_when_the_event_cannot_be_written_the_request_is_not_answered():
    auditor = Auditor(fail=True)
    status, headers, body = post_without_token(gate(auditor))
    assert status == 503  # not the 401 the request would have had
    assert b"www-authenticate" not in headers
    assert body["error"]["message"] == "audit unavailable; not answered"


def test_a_refusal_summary_that_could_not_be_written_is_written_next_time(settings):
    from audit.models import AuditEvent
    from mcpserver.auditing import RequestAuditor
    from mcpserver.records import RequestRecord

    settings.AUDIT_REFUSALS_PER_ADDRESS = 1
    settings.AUDIT_REFUSAL_WINDOW_SECONDS = 60

    class Writer:
        def __init__(self):
            self.down, self.events = True, []

        async def record(self, values):
            if self.down:
                raise RuntimeError("the audit database is unavailable")
            self.events.append(values)

    writer = Writer()
    auditor = RequestAuditor(writer)

    async def scenario():
        for _ in range(3):  # one recorded alone (it fails too), two counted
            record = RequestRecord(request_id="r" * 32, started=0.0, client="198.51.100.7")
            record.outcome = AuditEvent.Outcome.UNAUTHENTICATED
            record.reason, record.status = AuditEvent.Reason.UNKNOWN_TOKEN, 401
            try:
                await auditor.completed(record)
            except RuntimeError:
                pass
        try:
            await auditor.flush(final=True)
        except RuntimeError:
            pass
        writer.down = False
        return await auditor.flush(final=False)

    assert anyio.run(scenario) == 1
    (summary,) = writer.events
    assert summary["changes"]["counts"] == {"401 unknown": 2}
