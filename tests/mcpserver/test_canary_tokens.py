"""Distinctive tokens through every path; then no trace of them anywhere we keep or send data."""

from datetime import timedelta
from io import StringIO

import pytest
from django.db import connection
from django.utils import timezone

from audit.export import export_jsonl, provable_range, requested_range
from audit.memory_api import memory_for
from audit.models import AuditEvent
from kb.models import Stakeholder
from registry.services import delegation_register
from tests.live import free_port, live_server
from tests.mcpserver.conftest import TOOL, Server, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

CANARY_OK = "CANARYok7Q2mZx9LwP4vRt8YbN3cKd6Hf1Js"
CANARY_SUSPENDED = "CANARYsusp5Ww2Xq8Lm3Pz7Nv4Rk9Tb6Yc1Hd"
CANARY_FORGED = "CANARYforged8Gh3Jk6Lp2Qs5Vx9Zb4Nm7Wc1Rt"
CANARIES = (CANARY_OK, CANARY_SUSPENDED, CANARY_FORGED)
CANARY_CLIENT = "CANARYclient3Rb8Nw5Kx2Lq7Zv4Mh9Pd6Jt1Fs"


def database_text() -> str:
    """Every row of every table, as text."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT * FROM {quoted}")  # noqa: S608  (table names from introspection)
            chunks.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(chunks)


@pytest.fixture
def canary_server(world, tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        expires = timezone.now() + timedelta(days=1)
        delegation_register(
            raw_token=CANARY_OK,
            stakeholder=Stakeholder.objects.get(stakeholder_id="KB-P-001"),
            agent_name="canary",
            expires_at=expires,
        )
        delegation_register(
            raw_token=f"Bearer {CANARY_SUSPENDED}",
            stakeholder=Stakeholder.objects.get(stakeholder_id="KB-P-099"),
            agent_name="canary",
            expires_at=expires,
        )
    env = {"MCP_RATE_LIMIT": "8/minute", "MCP_AUTH_FAILURE_LIMIT": "1000/minute"}
    log = tmp_path / "server.log"
    with live_server(log, env) as url:
        yield Server(url=url, log=log)


def engine_error_response(tmp_path):
    """A tools/call whose engine fails: the ORDS backend pointed at a port nobody listens on."""
    env = {
        "KB_QUERY_BACKEND": "ords",
        "ORDS_SELECT_AI_URL": f"http://127.0.0.1:{free_port()}/ords/select_ai",
        "KB_ASSERTION_ISSUER": "https://kb.hyperbook.test",
        "ORDS_SELECT_AI_TIMEOUT_SECONDS": "2",
    }
    with live_server(tmp_path / "engine-error.log", env) as url:
        return Server(url=url, log=tmp_path / "engine-error.log").post(
            call("담당 고객 목록", 5), CANARY_OK
        )


def test_canary_tokens_leave_no_trace(canary_server, django_db_blocker, tmp_path):
    server = canary_server
    responses = [
        server.post(rpc("tools/list"), CANARY_OK),  # success
        server.post(call("담당 고객의 보험료 상세를 보여줘", 5), CANARY_OK),  # success
        server.post(call("날씨 어때?", 5), CANARY_OK),  # unmappable question
        server.post(  # validation error inside the tool
            rpc("tools/call", {"name": TOOL, "arguments": {"prompt": "고객", "limit": 0}}),
            CANARY_OK,
        ),
        server.post(  # validation error: unexpected argument carrying the token
            rpc("tools/call", {"name": TOOL, "arguments": {"prompt": "x", "token": CANARY_OK}}),
            CANARY_OK,
        ),
        server.post(b"{broken", CANARY_OK),  # malformed
        server.post(rpc("tools/list"), CANARY_FORGED),  # 401
        server.post(rpc("tools/list"), f"  {CANARY_FORGED}  x"),  # 401 malformed
        server.post(call("담당 고객 목록"), CANARY_SUSPENDED),  # 403
        server.post(rpc("tools/list"), CANARY_OK, headers={"Origin": "http://evil.example"}),
    ]
    responses += [server.post(rpc("tools/list"), CANARY_OK) for _ in range(6)]  # 429
    statuses = {r.status_code for r in responses}
    assert {200, 400, 401, 403, 429} <= statuses

    responses.append(engine_error_response(tmp_path))
    engine_error = responses[-1].json()["result"]
    assert engine_error["isError"] is True

    bodies = "\n".join(r.text + repr(dict(r.headers)) for r in responses)
    log = server.log.read_text(encoding="utf-8", errors="replace")
    log += (tmp_path / "engine-error.log").read_text(encoding="utf-8", errors="replace")
    with django_db_blocker.unblock():
        stored = database_text()
    for canary in CANARIES:
        assert canary not in bodies
        assert canary not in log
        assert canary not in stored
    assert "Traceback" not in bodies


@pytest.fixture
def client_text_server(world, tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        delegation_register(
            raw_token=CANARY_CLIENT,
            stakeholder=Stakeholder.objects.get(stakeholder_id="KB-P-001"),
            agent_name="canary",
            expires_at=timezone.now() + timedelta(days=1),
        )
    log = tmp_path / "server.log"
    with live_server(log, {"MCP_RATE_LIMIT": "1000/minute"}) as url:
        yield Server(url=url, log=log)


def test_client_text_beside_the_bearer_leaves_no_canary(
    client_text_server, world, django_db_blocker
):
    """The method, X-Request-ID, User-Agent and Origin are the client's own text: a token put in
    any of them (its own bearer, or any token of ours) is not kept, logged, exported or sent."""
    server = client_text_server
    other_user = world.tokens["KB-P-002"]  # an issued token: the secret shape, whoever owns it
    headers = {
        "X-Request-ID": CANARY_CLIENT,
        "User-Agent": f"agent/1.0 (Bearer {CANARY_CLIENT}) {other_user}",
    }
    responses = [
        server.post(rpc(f"x/{CANARY_CLIENT}"), CANARY_CLIENT, headers=headers),
        server.post(rpc(CANARY_CLIENT), CANARY_CLIENT, headers={"X-Request-ID": other_user}),
        server.post(rpc("tools/list"), CANARY_FORGED, headers={"X-Request-ID": CANARY_FORGED}),
        server.post(
            rpc("tools/list"),
            CANARY_CLIENT,
            headers={**headers, "Origin": f"http://{CANARY_CLIENT}.example"},
        ),
    ]
    assert [r.status_code for r in responses] == [200, 200, 401, 403]
    with django_db_blocker.unblock():
        connection.close()  # read the server's commits with a fresh connection
        events = list(AuditEvent.objects.filter(request_id__in=[
            r.headers["x-request-id"] for r in responses
        ]))  # fmt: skip
        assert len(events) == 4
        assert {(e.action, e.rpc_method) for e in events} == {("mcp.request", "")}
        assert {e.client_request_id for e in events} == {None}
        exported = StringIO()
        export_jsonl(exported, provable_range(requested_range()))
        sent = repr([memory_for(e) for e in events])
        stored = database_text()
    kept = "\n".join((stored, exported.getvalue(), sent, server.log.read_text(encoding="utf-8")))
    for canary in (CANARY_CLIENT, CANARY_FORGED, other_user):
        assert canary not in kept
