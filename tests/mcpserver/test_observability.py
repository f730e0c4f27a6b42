"""/metrics after known traffic to a real server (two workers, counting into shared files, as
bin/serve runs them), and traces exported over OTLP/HTTP to a collector of our own on loopback.
Neither carries a token, a prompt or a stakeholder id."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.live import live_server
from tests.mcpserver.conftest import Server, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

PLANNER_PROMPT = "'카나리아' 고객 목록"  # a quoted name: answered, with no row
MASKED_PROMPT = "주민번호가 87로 시작하는 고객 수"


def scrape(url: str) -> tuple[str, dict[tuple, float]]:
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200, response.text[:500]
    text = response.text
    return text, {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def counted_server(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("metrics")
    metrics_dir = folder / "prometheus"
    metrics_dir.mkdir()
    env = {
        "MCP_RATE_LIMIT": "10000/minute",
        "MCP_AUTH_FAILURE_LIMIT": "10000/minute",
        "METRICS_ALLOWED_NETWORKS": "127.0.0.1/32",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    with live_server(folder / "server.log", env, workers=2) as url:
        yield Server(url=url, log=folder / "server.log")


def test_metrics_count_known_traffic_across_workers_and_leak_nothing(counted_server, world):
    server = counted_server
    planner, analyst = world.tokens["KB-P-001"], world.tokens["KB-H-001"]
    for _ in range(3):  # each on a connection of its own, so both workers serve some
        assert server.post(rpc("tools/list"), planner).status_code == 200
    answered = server.post(call(PLANNER_PROMPT, 5), planner).json()["result"]
    assert not answered.get("isError")
    refused = server.post(call(MASKED_PROMPT, 5), analyst).json()["result"]
    assert refused["isError"]
    for _ in range(2):
        assert server.post(rpc("tools/list")).status_code == 401
    assert (
        server.post(rpc("tools/list"), planner, {"Origin": "https://evil.example"}).status_code
        == 403
    )

    text, samples = scrape(server.url)
    requests = "hyperbook_mcp_requests_total"
    assert value(samples, requests, action="mcp.tools_list", outcome="allowed", reason="-") == 3
    assert value(samples, requests, action="mcp.tools_call", outcome="allowed", reason="-") == 1
    assert (
        value(
            samples, requests, action="mcp.tools_call", outcome="refused", reason="masked_condition"
        )
        == 1
    )
    assert (
        value(
            samples,
            requests,
            action="mcp.request",
            outcome="unauthenticated",
            reason="missing_token",
        )
        + value(
            samples,
            requests,
            action="mcp.tools_list",
            outcome="unauthenticated",
            reason="missing_token",
        )
        == 2
    )
    assert (
        value(samples, requests, action="mcp.request", outcome="refused_origin", reason="origin")
        == 1
    )
    latency = "hyperbook_mcp_request_duration_seconds_count"
    assert value(samples, latency, action="mcp.tools_list") >= 3
    assert value(samples, "hyperbook_select_ai_answers_total", family="customers:list") == 1
    assert value(samples, "hyperbook_select_ai_refusals_total", reason="masked_condition") == 1
    assert (
        value(
            samples,
            "hyperbook_audit_backlog_events",
        )
        >= 8
    )

    # Nothing of a request: no token, no prompt, no stakeholder id, in any label or value.
    for secret in (planner, analyst, PLANNER_PROMPT, MASKED_PROMPT, "카나리아"):
        assert secret not in text
    for stakeholder_id in world.tokens:
        assert stakeholder_id not in text


def test_metrics_are_refused_to_an_address_outside_the_allowed_networks(world, tmp_path):
    env = {"METRICS_ALLOWED_NETWORKS": "10.9.9.0/24"}
    with live_server(tmp_path / "server.log", env) as url:
        refused = httpx.get(f"{url}/metrics", headers={"X-Forwarded-For": "10.9.9.9"}, timeout=10)
    assert refused.status_code in (401, 403)


class _Collector(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self):  # noqa: N802 (the handler's name is http.server's)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/traces":
            type(self).received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def spans_of(bodies: list[bytes]) -> list:
    spans = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    return spans


@pytest.fixture
def collector_env():
    """An OTLP collector on loopback, and the environment that points a server at it."""
    _Collector.received = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(
        target=collector.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    yield {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    collector.shutdown()
    collector.server_close()


def attributes(span) -> dict:
    result = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        if kind == "array_value":
            result[item.key] = [v.string_value for v in item.value.array_value.values]
        else:
            result[item.key] = getattr(item.value, kind)
    return result


def test_with_an_otlp_endpoint_the_gate_tool_plan_and_audit_append_are_traced(
    world, tmp_path, collector_env
):
    env = {**collector_env, "OTEL_SERVICE_NAME": "hyperbook-test"}
    token = world.tokens["KB-P-001"]
    with live_server(tmp_path / "server.log", env) as url:
        server = Server(url=url, log=tmp_path / "server.log")
        response = server.post(call(PLANNER_PROMPT, 5), token)
        request_id = response.headers["x-request-id"]
        wanted = {"mcp.gate", "kb.tool", "kb.execute_plan", "audit.append"}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            spans = spans_of(_Collector.received)
            if wanted <= {span.name for span in spans}:
                break
            time.sleep(0.2)
    by_name = {span.name: span for span in spans}
    assert wanted <= set(by_name), sorted(by_name)
    for name in ("mcp.gate", "kb.tool", "kb.execute_plan"):
        assert attributes(by_name[name])["hyperbook.request_id"] == request_id, name
    assert request_id in attributes(by_name["audit.append"])["hyperbook.request_ids"]
    # One trace: the tool and the plan's execution are inside the gate's span.
    assert by_name["kb.tool"].trace_id == by_name["mcp.gate"].trace_id
    assert by_name["kb.execute_plan"].trace_id == by_name["mcp.gate"].trace_id
    exported = b"".join(_Collector.received)
    for secret in (token.encode(), PLANNER_PROMPT.encode(), "카나리아".encode()):
        assert secret not in exported


# One tools/call, stage by stage, in the order its spans start.
ONE_WAY_THROUGH = [
    "mcp.gate",
    "kb.tool",
    "kb.answer",
    "kb.read_question",
    "kb.plan_parse",
    "kb.police",
    "kb.proofread",
    "kb.execute_plan",
    "kb.answer_build",
]


def test_a_tool_call_goes_through_each_stage_once_in_order(world, tmp_path, collector_env):
    env = collector_env
    with live_server(tmp_path / "server.log", env) as url:
        server = Server(url=url, log=tmp_path / "server.log")
        response = server.post(call(PLANNER_PROMPT, 5), world.tokens["KB-P-001"])
        assert response.status_code == 200, response.text[:500]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if set(ONE_WAY_THROUGH) <= {s.name for s in spans_of(_Collector.received)}:
                break
            time.sleep(0.2)
    spans = spans_of(_Collector.received)
    (gate,) = [s for s in spans if s.name == "mcp.gate"]
    in_its_trace = sorted(
        (s for s in spans if s.trace_id == gate.trace_id and s.name != "audit.append"),
        key=lambda s: s.start_time_unix_nano,
    )
    assert [s.name for s in in_its_trace] == ONE_WAY_THROUGH


def test_a_clients_traceparent_is_a_link_never_a_parent_and_its_words_are_no_span_names(
    world, tmp_path, collector_env
):
    env = collector_env
    client_trace, client_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    canary = "CANARYspan9Qx4Lm2Rv7Tz"
    token = world.tokens["KB-P-001"]
    with live_server(tmp_path / "server.log", env) as url:
        server = Server(url=url, log=tmp_path / "server.log")
        traced = server.post(
            rpc("tools/list"), token, {"traceparent": f"00-{client_trace}-{client_span}-01"}
        )
        meta = {"_meta": {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"}}
        server.post(rpc("tools/list", meta), token)  # nor through the message's _meta
        server.post(rpc(f"x/{canary}"), token)
        server.post(rpc(canary), token)
        httpx.request(canary.upper(), server.mcp, timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            gates = [s for s in spans_of(_Collector.received) if s.name == "mcp.gate"]
            if len(gates) >= 5:
                break
            time.sleep(0.2)
    spans = spans_of(_Collector.received)
    assert {span.name for span in spans} <= {
        "mcp.gate",
        "kb.tool",
        "kb.execute_plan",
        "audit.append",
    }
    (gate,) = [
        s
        for s in spans
        if s.name == "mcp.gate"
        and attributes(s)["hyperbook.request_id"] == traced.headers["x-request-id"]
    ]
    assert gate.parent_span_id == b"" and gate.trace_id.hex() != client_trace  # our own trace
    assert {s.trace_id.hex() for s in spans}.isdisjoint({client_trace, "ab" * 16})
    assert [(link.trace_id.hex(), link.span_id.hex()) for link in gate.links] == [
        (client_trace, client_span)
    ]
    exported = b"".join(_Collector.received)
    assert canary.encode() not in exported and canary.upper().encode() not in exported


def test_a_count_that_cannot_be_kept_never_costs_an_answer(monkeypatch):
    """The gate answers and records the request even when the metrics store fails."""
    import asyncio

    from mcpserver import gate, metrics
    from mcpserver.records import RequestRecord

    def broken(record):
        raise OSError("No space left on device")

    monkeypatch.setattr(metrics, "request_counted", broken)
    recorded = []

    class Auditor:
        async def completed(self, record):
            recorded.append(record.request_id)

    the_gate = gate.McpGate(
        None,
        allowed_hosts=["127.0.0.1"],
        allowed_origins=[],
        resource_url="",
        authorization_servers=[],
        max_body_bytes=1024,
        rate_limits=None,
        auditor=Auditor(),
    )
    record = RequestRecord(request_id="r-1", started=0.0)
    assert asyncio.run(the_gate._finish(record)) is True
    assert recorded == ["r-1"]
