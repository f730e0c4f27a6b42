"""/mcp under abuse, each defect with its reproduction: malformed bodies, spoofed addresses,
work before throttling, others' failures, a flood, client-chosen request ids, odd Host ports."""

import json
import time

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from audit.chain import event_hash
from audit.models import AuditEvent
from mcpserver.auditing import event_values
from mcpserver.gate import parse_message
from mcpserver.http import host_allowed
from mcpserver.records import RequestRecord
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, Server, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

BAD_TOKEN = "hbvpd_" + "NotAToken0123456789abcdefghijklmnopqrstu"


@pytest.fixture(autouse=True)
def committed(django_db_setup, django_db_blocker):
    """Read what the server process committed, in autocommit, as its own reader would."""
    with django_db_blocker.unblock():
        yield


def events_for(response: httpx.Response) -> list[AuditEvent]:
    connection.close()  # read the server's commits with a fresh connection
    return list(AuditEvent.objects.filter(request_id=response.headers["x-request-id"]))


def the_event(response: httpx.Response) -> AuditEvent:
    (event,) = events_for(response)
    return event


# --- 1, 2: malformed bodies are 400s, and always audited ------------------------------------------


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


MALFORMED = {
    "nested 1,000 deep": '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":'
    + deep(1000)
    + "}}",
    "nested 30,000 deep": deep(30_000),
    "lone surrogate in the prompt": json.dumps(call("x"))
    .replace('"prompt": "x"', '"prompt": "\\ud800"')
    .replace('"prompt":"x"', '"prompt":"\\ud800"'),
    "lone surrogate in the id": '{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
    "lone surrogate in an argument's key": json.dumps(call("x")).replace('"limit"', '"\\udfff"'),
    "lone surrogate as the method": '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
    "lone surrogate as the tool name": json.dumps(
        rpc("tools/call", {"name": "\\ud800", "arguments": {}})
    ).replace("\\\\ud800", "\\ud800"),
}


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_body_is_a_400_with_a_jsonrpc_error_and_an_event(server, world, body):
    response = server.post(body.encode(), world.tokens["KB-H-001"])
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] in (-32700, -32600)
    event = the_event(response)
    assert (event.outcome, event.http_status) == ("malformed", 400)
    assert "Traceback" not in server.log.read_text(errors="replace")


def test_the_message_checks_depth_and_unicode():
    assert parse_message(b'{"a": {"b": [1, 2, {"c": "d"}]}}')[0] == {"a": {"b": [1, 2, {"c": "d"}]}}
    assert parse_message(("[" * 40 + "]" * 40).encode()) == (
        None,
        "Batches and non-object messages are not supported",
    )
    assert parse_message(('{"a":' + deep(40) + "}").encode())[1] == "Message nested too deeply"
    assert parse_message(b'{"\\ud83d": 1}')[1] == "Message text is not valid Unicode"
    assert parse_message(b'{"ok": "\\ud83d\\ude00"}')[0] == {"ok": "\U0001f600"}  # a valid pair


def test_an_event_can_be_built_from_any_text_the_gate_saw():
    record = RequestRecord(
        request_id="r" * 32,
        started=0.0,
        rpc_method="\ud800",
        tool="x\udfff",
        user_agent="\ud800agent",
        reason="\ud800",
    )
    values = event_values(record)
    assert values["rpc_method"] == "\\ud800" and values["tool"] == "x\\udfff"
    assert len(event_hash({**values, "id": "x", "occurred_at": timezone.now()})) == 64


# --- 3: the client's address comes from the socket unless a proxy is trusted ----------------------


def post(url, token, headers=None, body=None):
    return httpx.post(
        f"{url}/mcp",
        json=body or rpc("tools/list"),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", **(headers or {})},
        timeout=30,
    )


def test_a_forwarded_for_header_from_an_untrusted_peer_changes_nothing(world, tmp_path):
    env = {"MCP_AUTH_FAILURE_LIMIT": "20/minute", "MCP_RATE_LIMIT": "1000/minute"}
    with live_server(tmp_path / "server.log", env) as url:
        rotating = [
            post(url, BAD_TOKEN, {"X-Forwarded-For": f"198.51.100.{n}"}).status_code
            for n in range(30)
        ]
        valid = post(url, world.tokens["KB-P-001"], {"X-Forwarded-For": "203.0.113.77"})
    assert rotating[:20] == [401] * 20 and set(rotating[20:]) == {429}  # one address: ours
    assert valid.status_code == 200
    assert the_event(valid).client_address == "127.0.0.1"


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_clients(world, tmp_path):
    env = {
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
        "MCP_AUTH_FAILURE_LIMIT": "3/minute",
        "MCP_RATE_LIMIT": "1000/minute",
    }
    with live_server(tmp_path / "server.log", env) as url:
        first = [post(url, BAD_TOKEN, {"X-Forwarded-For": "203.0.113.5"}) for _ in range(4)]
        other = post(url, BAD_TOKEN, {"X-Forwarded-For": "203.0.113.6"})
    assert [r.status_code for r in first] == [401, 401, 401, 429]
    assert other.status_code == 401  # another client behind the proxy has its own budget
    assert the_event(other).client_address == "203.0.113.6"


# --- 4, 5: the delegation's limit before any work; others' failures never lock a valid token out --


def test_a_delegation_over_its_limit_gets_429_before_its_body_is_read(world, tmp_path):
    env = {"MCP_RATE_LIMIT": "2/minute", "MCP_AUTH_FAILURE_LIMIT": "1000/minute"}
    token = world.tokens["KB-P-002"]
    with live_server(tmp_path / "server.log", env) as url:
        statuses = [post(url, token).status_code for _ in range(2)]
        wrong_type = httpx.post(
            f"{url}/mcp",
            content=b"not json",
            headers={
                **MCP_HEADERS,
                "Content-Type": "text/plain",
                "Authorization": f"Bearer {token}",
            },
            timeout=30,
        )
        too_large = httpx.post(
            f"{url}/mcp",
            content=b"{" + b" " * 200_000 + b"}",
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=30,
        )
        malformed = httpx.post(
            f"{url}/mcp",
            content=deep(5000).encode(),
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=30,
        )
        log = (tmp_path / "server.log").read_text(errors="replace")
    assert statuses == [200, 200]
    assert [wrong_type.status_code, too_large.status_code, malformed.status_code] == [429] * 3
    assert all(r.headers["retry-after"] for r in (wrong_type, too_large, malformed))
    assert "Traceback" not in log


def test_others_failures_never_lock_out_a_valid_token_but_still_throttle_guesses(world, tmp_path):
    env = {"MCP_AUTH_FAILURE_LIMIT": "5/minute", "MCP_RATE_LIMIT": "1000/minute"}
    with live_server(tmp_path / "server.log", env) as url:
        guesses = [post(url, BAD_TOKEN + str(n)).status_code for n in range(8)]
        valid = post(url, world.tokens["KB-P-003"])
        after = post(url, BAD_TOKEN + "x")
    assert guesses == [401] * 5 + [429] * 3
    assert valid.status_code == 200
    assert after.status_code == 429
    # An address over its budget learns nothing from the answer: unknown, malformed and missing
    # tokens all get the same 429.
    assert "invalid_token" not in after.text


# --- 6: a flood is recorded one by one up to a budget, then summarised ----------------------------


def test_a_flood_of_refusals_is_budgeted_and_summarised(world, tmp_path):
    env = {
        "AUDIT_REFUSALS_PER_ADDRESS": "5",
        "AUDIT_REFUSAL_WINDOW_SECONDS": "4",
        "MCP_AUTH_FAILURE_LIMIT": "10/minute",
        "MCP_RATE_LIMIT": "1000/minute",
    }
    with live_server(tmp_path / "server.log", env) as url:
        connection.close()
        before = AuditEvent.objects.order_by("-sequence").values_list("sequence", flat=True).first()
        flood = [post(url, BAD_TOKEN + str(n)) for n in range(30)]
        wrong_origin = post(url, world.tokens["KB-P-001"], {"Origin": "https://evil.example"})
        time.sleep(7)  # the window ends; its summary is written
    connection.close()
    new = list(AuditEvent.objects.filter(sequence__gt=before or 0).order_by("sequence"))
    single = [e for e in new if e.action != "mcp.refusals_summary"]
    summaries = [e for e in new if e.action == "mcp.refusals_summary"]
    assert len(single) == 5  # the budget: 5 one by one
    (summary,) = summaries
    assert summary.outcome == "summary" and summary.client_address == "127.0.0.1"
    counts = summary.changes["counts"]
    assert summary.changes["total"] == sum(counts.values()) == 31 - 5  # every request accounted
    assert counts == {"401 unknown": 5, "429 auth_rate_limited": 20, "403 origin": 1}
    assert [r.status_code for r in flood] == [401] * 10 + [429] * 20
    assert wrong_origin.status_code == 403


# --- 7: the request id is ours; the client's is kept beside it ------------------------------------


def test_a_clients_request_id_is_kept_beside_ours_and_never_replaces_it(server, world):
    first = server.post(rpc("tools/list"), world.tokens["KB-P-001"], {"X-Request-ID": "client-1"})
    again = server.post(rpc("tools/list"), world.tokens["KB-P-001"], {"X-Request-ID": "client-1"})
    assert first.headers["x-request-id"] != again.headers["x-request-id"] != "client-1"
    assert first.headers["x-client-request-id"] == "client-1"
    assert the_event(first).client_request_id == the_event(again).client_request_id == "client-1"
    connection.close()
    assert AuditEvent.objects.filter(client_request_id="client-1").count() == 2


# --- 8: small gaps --------------------------------------------------------------------------------


def raw_post(url: str, path: str, host: str, headers: dict, body: bytes = b"") -> tuple:
    """(status, headers) for a request whose Host header httpx would refuse to send."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection_ = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection_.putrequest("POST" if body else "GET", path, skip_host=True)
        connection_.putheader("Host", host)  # written as Latin-1, as a client may
        for name, value in headers.items():
            connection_.putheader(name, value)
        connection_.putheader("Content-Length", str(len(body)))
        connection_.endheaders(body)
        response = connection_.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection_.close()


@pytest.mark.parametrize("host", ["127.0.0.1:²", "localhost:³", "127.0.0.1:", "evil:80"])
def test_a_host_with_a_non_ascii_or_missing_port_is_refused(server, world, host):
    assert not host_allowed(host, {"127.0.0.1", "localhost"})
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {world.tokens['KB-P-001']}"}
    status, _ = raw_post(server.url, "/mcp", host, headers, json.dumps(rpc("tools/list")).encode())
    assert status == 403


def test_the_metadata_uses_the_gates_host_check_and_carries_a_request_id(server):
    ok = httpx.get(f"{server.url}/.well-known/oauth-protected-resource", timeout=10)
    status, headers = raw_post(
        server.url, "/.well-known/oauth-protected-resource", "127.0.0.1:²", {}
    )
    assert ok.status_code == 200 and len(ok.headers["x-request-id"]) == 32
    assert status == 403 and headers["x-request-id"]


def test_server_fixture_is_a_real_process(server: Server):
    assert server.url.startswith("http://127.0.0.1:")
