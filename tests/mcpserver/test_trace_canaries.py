"""Questions refused, failed and answered, carrying a customer's name, a phone number, an e-mail
address, SQL-ish text and a canary bearer token, through real servers that export their spans to
an OTLP/HTTP collector of our own on loopback: spans arrive, the refusal's carries its type and
reason, and no canary is anywhere in them."""

import gzip
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from audit.models import AuditEvent
from kb.models import Stakeholder
from registry.services import delegation_register
from tests.live import free_port, live_server
from tests.mcpserver.conftest import TOOL, Server, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

KOREAN_NAME, PHONE = "홍길동", "010-1234-5678"
ENGLISH_NAME, EMAIL = "Marguerite Oyelaran", "m.oyelaran@canary-mail.example"
SQL = "' OR 1=1; DROP TABLE kb_customer; --"
CANARY_TOKEN = "CANARYtrace4Hq8Zm2Wx7Lp5Rv9Nc3Kt6Yb1Fd"
CANARY_FORGED = "CANARYtraceForged9Lm3Qx7Zp2Wv5Rk8Nt4Hb"
CANARIES = (
    KOREAN_NAME,
    PHONE,
    ENGLISH_NAME,
    "Oyelaran",
    EMAIL,
    "canary-mail",
    SQL,
    "DROP TABLE",
    CANARY_TOKEN,
    CANARY_FORGED,
)

# Refused for the words it could not read, which the refusal quotes: the name and the number.
REFUSED_KOREAN = f"{KOREAN_NAME} {PHONE} 고객의 보험료"
REFUSED_ENGLISH = f"premiums of {ENGLISH_NAME} {EMAIL}"
# Read as far as a plan naming the customer, then refused for the number.
REFUSED_AFTER_A_PLAN = f"고객 {KOREAN_NAME} {PHONE} 보험료 납입 내역"
OUT_OF_DATA = f"{KOREAN_NAME} {PHONE} 고객의 청구 내역"
SQL_QUESTION = f"고객 목록 {SQL}"
ANSWERED_BY_NAME = f"'{KOREAN_NAME}' 고객 목록"  # a quoted name: answered, with no row
ANSWERED_WITH_ROWS = "담당 고객 목록"


class _Collector(BaseHTTPRequestHandler):
    """OTLP/HTTP as the specification has it: POST /v1/traces, a binary protobuf
    ExportTraceServiceRequest (gzip allowed), answered with an ExportTraceServiceResponse."""

    received: list[bytes] = []

    def do_POST(self):  # noqa: N802 (the handler's name is http.server's)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/traces":
            return self._reply(404)
        if self.headers.get("Content-Type") != "application/x-protobuf":
            return self._reply(415)
        encoding = self.headers.get("Content-Encoding", "identity")
        if encoding not in ("identity", "gzip"):
            return self._reply(415)
        if encoding == "gzip":
            body = gzip.decompress(body)
        try:
            ExportTraceServiceRequest().ParseFromString(body)
        except DecodeError:
            return self._reply(400)
        type(self).received.append(body)
        return self._reply(200, ExportTraceServiceResponse().SerializeToString())

    def _reply(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def collector():
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def exported() -> list[ExportTraceServiceRequest]:
    requests = []
    for body in _Collector.received:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        requests.append(request)
    return requests


def spans_of(requests) -> list:
    return [
        span
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def attributes(holder) -> dict:
    return {kv.key: value_of(kv.value) for kv in holder.attributes}


def texts(requests) -> list[str]:
    """Every piece of text the spans carry: resource, scope, names, attributes (keys and values),
    events, links and status descriptions."""
    found: list[str] = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                found.append(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, bytes):
            found.append(value.decode("utf-8", "replace"))
        elif value is not None:
            found.append(str(value))

    for request in requests:
        for resource in request.resource_spans:
            walk(attributes(resource.resource))
            for scope in resource.scope_spans:
                found.extend((scope.scope.name, scope.scope.version))
                walk(attributes(scope.scope))
                for span in scope.spans:
                    found.extend((span.name, span.trace_state, span.status.message))
                    walk(attributes(span))
                    for event in span.events:
                        found.append(event.name)
                        walk(attributes(event))
                    for link in span.links:
                        walk(attributes(link))
    return found


@pytest.fixture
def canary_token(world, django_db_blocker) -> str:
    with django_db_blocker.unblock():
        delegation_register(
            raw_token=CANARY_TOKEN,
            stakeholder=Stakeholder.objects.get(stakeholder_id="KB-P-001"),
            agent_name="trace-canary",
            expires_at=timezone.now() + timedelta(days=1),
        )
    return CANARY_TOKEN


def tool_result(response) -> dict:
    assert response.status_code == 200, response.text[:500]
    return response.json()["result"]


def wait_for_gates(request_ids: set[str]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        gates = {
            attributes(span).get("hyperbook.request_id")
            for span in spans_of(exported())
            if span.name == "mcp.gate"
        }
        if request_ids <= gates:
            return
        time.sleep(0.2)


def test_spans_carry_no_question_words_rows_or_tokens_of_refused_failed_and_answered_calls(
    canary_token, tmp_path
):
    env = {"MCP_RATE_LIMIT": "10000/minute", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    with collector() as endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
        with live_server(tmp_path / "server.log", env) as url:
            server = Server(url=url, log=tmp_path / "server.log")
            refused = server.post(call(REFUSED_KOREAN, 5), canary_token)
            responses = {
                "refused": refused,
                "refused_english": server.post(call(REFUSED_ENGLISH, 5), canary_token),
                "refused_after_a_plan": server.post(call(REFUSED_AFTER_A_PLAN, 5), canary_token),
                "out_of_data": server.post(call(OUT_OF_DATA, 5), canary_token),
                "sql": server.post(call(SQL_QUESTION, 5), canary_token),
                "answered_by_name": server.post(call(ANSWERED_BY_NAME, 5), canary_token),
                "answered": server.post(call(ANSWERED_WITH_ROWS, 20), canary_token),
                "bad_arguments": server.post(  # the words come back in ArgumentError's message
                    rpc(
                        "tools/call",
                        {"name": TOOL, "arguments": {"prompt": "x", f"{KOREAN_NAME} {EMAIL}": 1}},
                    ),
                    canary_token,
                ),
                "forged": server.post(rpc("tools/list"), CANARY_FORGED),
            }
            wait_for_gates({r.headers["x-request-id"] for r in responses.values()})
        # The ORDS backend pointed at a port nobody listens on: the engine fails on the question.
        ords = {
            **env,
            "KB_QUERY_BACKEND": "ords",
            "ORDS_SELECT_AI_URL": f"http://127.0.0.1:{free_port()}/ords/select_ai",
            "KB_ASSERTION_ISSUER": "https://kb.hyperbook.test",
            "ORDS_SELECT_AI_TIMEOUT_SECONDS": "2",
        }
        with live_server(tmp_path / "engine-error.log", ords) as url:
            server = Server(url=url, log=tmp_path / "engine-error.log")
            responses["failed"] = server.post(call(OUT_OF_DATA, 5), canary_token)
            wait_for_gates({responses["failed"].headers["x-request-id"]})

    results = {name: tool_result(r) for name, r in responses.items() if name != "forged"}
    assert responses["forged"].status_code == 401
    refusals = ("refused", "refused_english", "refused_after_a_plan", "out_of_data", "sql")
    for name in (*refusals, "bad_arguments", "failed"):
        assert results[name]["isError"] is True, (name, results[name])
    # The asker is told the words; the trace is not.
    assert f"'{KOREAN_NAME} {PHONE}'" in results["refused"]["content"][0]["text"]
    assert ENGLISH_NAME in results["refused_english"]["content"][0]["text"]
    assert KOREAN_NAME in results["bad_arguments"]["content"][0]["text"]
    for name in ("answered_by_name", "answered"):
        assert not results[name].get("isError"), (name, results[name])
    rows = results["answered"]["structuredContent"]["rows"]
    assert rows

    requests = exported()
    spans = spans_of(requests)
    by_request: dict[str, dict[str, object]] = {}
    for span in spans:
        request_id = attributes(span).get("hyperbook.request_id")
        if request_id:
            by_request.setdefault(request_id, {})[span.name] = span
    for name, response in responses.items():
        assert "mcp.gate" in by_request[response.headers["x-request-id"]], name

    # What failed says what, in names of ours: its type and the audit's reason, nothing else.
    expected = {
        **dict.fromkeys(refusals, "QuestionRefused"),
        "bad_arguments": "ArgumentError",
        "failed": "OrdsError",
    }
    reasons = {reason.value for reason in AuditEvent.Reason}
    for name, error_type in expected.items():
        tool_span = by_request[responses[name].headers["x-request-id"]]["kb.tool"]
        marked = attributes(tool_span)
        assert marked["error.type"] == error_type, (name, marked)
        assert marked["hyperbook.reason"] in reasons, (name, marked)
        assert tool_span.status.code == tool_span.status.STATUS_CODE_ERROR
    refused_spans = by_request[refused.headers["x-request-id"]]
    assert attributes(refused_spans["kb.answer"])["error.type"] == "QuestionRefused"
    assert attributes(refused_spans["kb.tool"])["hyperbook.reason"] == "unread_words"
    failed_tool = by_request[responses["failed"].headers["x-request-id"]]["kb.tool"]
    assert attributes(failed_tool)["hyperbook.reason"] == "engine_error"

    # Nowhere: no exception events, no status text, no canary in any text or in the raw bytes.
    assert all(not span.events and not span.status.message for span in spans)
    carried = texts(requests)
    raw = b"".join(_Collector.received)
    row_values = {
        value
        for row in rows
        for value in row.values()
        if isinstance(value, str) and (len(value) >= 6 or not value.isascii())
    }
    assert row_values
    for canary in (*CANARIES, *row_values):
        assert canary.encode() not in raw, canary
        assert not [text for text in carried if canary in text], canary
