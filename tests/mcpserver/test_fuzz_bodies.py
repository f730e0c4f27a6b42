"""5,000 hostile bodies against a real /mcp process: JSON text built by hand (so that it can carry
what a JSON library would never write: lone surrogate escapes, duplicate keys, numbers of any size,
nesting of any depth), every field of a message given every type, batches, and every Content-Type
and Content-Encoding. After each: no 5xx, our request id, the server up. After all: exactly one
audit event per request, and the server's memory grown by less than 5%."""

import json
from pathlib import Path

import httpx
import pytest
from django.db import connection
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audit.models import AuditEvent
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, TOOL

pytestmark = [pytest.mark.db, pytest.mark.slow]

EXAMPLES_PER_TEST = 2500  # two tests: 5,000 bodies a run
FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST,
    deadline=None,
    derandomize=True,  # the same bodies every run: a failure is reproducible
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

# --- JSON text, by hand ---------------------------------------------------------------------------

escapes = st.sampled_from(
    ["\\ud800", "\\udfff", "\\ud83d", "\\ude00", "\\ud83d\\ude00", "\\u0000", "\\\\", '\\"', "\\n"]
)
plain = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters='"\\'), max_size=12
)
json_strings = st.lists(st.one_of(plain, escapes), max_size=4).map(lambda p: '"' + "".join(p) + '"')
json_numbers = st.one_of(
    st.integers().map(str),
    st.sampled_from(
        ["1e400", "-1e400", "1" + "0" * 400, "-0", "0.1e-400", "9223372036854775808", "1.5"]
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
json_scalars = st.one_of(json_strings, json_numbers, st.sampled_from(["true", "false", "null"]))


def objects(children):
    # Duplicate keys on purpose: the pairs are drawn from a small set of names.
    keys = st.one_of(json_strings, st.sampled_from(['"prompt"', '"limit"', '"name"', '"id"']))
    pairs = st.lists(st.tuples(keys, children), max_size=4)
    return pairs.map(lambda items: "{" + ",".join(f"{k}:{v}" for k, v in items) + "}")


json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        objects(children),
    ),
    max_leaves=10,
)
deep_values = st.integers(min_value=20, max_value=3000).map(lambda n: "[" * n + "]" * n)
fields = {
    "jsonrpc": st.one_of(st.just('"2.0"'), json_values),
    "id": st.one_of(json_numbers, json_strings, json_values),
    "method": st.one_of(
        st.sampled_from(['"tools/call"', '"tools/list"', '"initialize"', '"ping"']),
        json_strings,
        json_values,
    ),
}
arguments = objects(st.one_of(json_values, deep_values))
params = st.one_of(
    json_values,
    deep_values,
    st.tuples(st.one_of(st.just(f'"{TOOL}"'), json_strings), arguments).map(
        lambda pair: f'{{"name":{pair[0]},"arguments":{pair[1]}}}'
    ),
)


@st.composite
def messages(draw) -> str:
    parts = [
        f'"{name}":{draw(strategy)}' for name, strategy in fields.items() if draw(st.booleans())
    ]
    if draw(st.booleans()):
        parts.append(f'"params":{draw(params)}')
    if draw(st.booleans()):  # a key repeated with another value
        parts.append(f'"method":{draw(json_values)}')
    message = "{" + ",".join(draw(st.permutations(parts))) + "}"
    shape = draw(st.sampled_from(["one", "one", "one", "batch", "deep"]))
    if shape == "batch":
        return "[" + ",".join([message] * draw(st.integers(0, 3))) + "]"
    if shape == "deep":
        return draw(deep_values)
    return message


content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=latin-1",
        "APPLICATION/JSON",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ]
)
content_encodings = st.sampled_from(["", "identity", "gzip", "deflate", "br", "zstd", "x-junk"])


@pytest.fixture(autouse=True)
def committed(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        yield


# --- the server and what it keeps -----------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_server(world, tmp_path_factory):
    log = tmp_path_factory.mktemp("fuzz") / "server.log"
    env = {"MCP_RATE_LIMIT": "100000/minute", "MCP_AUTH_FAILURE_LIMIT": "100000/minute"}
    with live_server(log, env) as url:
        pid = server_pid(url)
        client = httpx.Client(timeout=30)
        token = world.tokens["KB-H-001"]
        for _ in range(50):  # warm up before the first memory reading
            client.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})  # fmt: skip
        state = {"url": url, "pid": pid, "log": log, "client": client, "token": token, "ids": []}
        state["rss_before"] = rss_kib(pid)
        yield state
        client.close()


def server_pid(url: str) -> int:
    """The uvicorn process listening on this URL's port, found through /proc."""
    port = url.rsplit(":", 1)[1]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"uvicorn" in b" ".join(argv) and port.encode() in argv:
            return int(cmdline.parent.name)
    raise AssertionError(f"no server process on port {port}")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def send(state, body: bytes, content_type: str, encoding: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {state['token']}"}
    headers["Content-Type"] = content_type
    if encoding:
        headers["Content-Encoding"] = encoding
    response = state["client"].post(f"{state['url']}/mcp", content=body, headers=headers)
    assert response.status_code < 500, (body[:300], response.status_code, response.text[:300])
    assert response.headers.get("x-request-id")
    state["ids"].append(response.headers["x-request-id"])
    return response


# Seeds of past failures, kept as explicit examples.
PAST_FAILURES = [
    '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":' + "[" * 1000 + "]" * 1000 + "}}",
    '{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
    '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
    f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{TOOL}",'
    '"arguments":{"prompt":"\\ud800","limit":5}}}',
    f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{TOOL}",'
    '"arguments":{"\\udfff":1,"prompt":"x"}}}',
    '{"jsonrpc":"2.0","id":' + "9" * 400 + ',"method":"tools/list"}',
    '{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}',
]


@FUZZ
@given(body=messages(), content_type=content_types)
@example(body=PAST_FAILURES[0], content_type="application/json")
@example(body=PAST_FAILURES[1], content_type="application/json")
@example(body=PAST_FAILURES[2], content_type="application/json")
@example(body=PAST_FAILURES[3], content_type="application/json")
@example(body=PAST_FAILURES[4], content_type="application/json")
@example(body=PAST_FAILURES[5], content_type="application/json")
@example(body=PAST_FAILURES[6], content_type="application/json")
def test_hostile_json_text_never_gets_a_server_error(fuzz_server, body, content_type):
    send(fuzz_server, body.encode("utf-8", "surrogatepass"), content_type, "")


@FUZZ
@given(
    body=st.one_of(messages().map(lambda b: b.encode("utf-8", "surrogatepass")), st.binary()),
    content_type=content_types,
    encoding=content_encodings,
)
def test_any_bytes_and_encoding_never_get_a_server_error(fuzz_server, body, content_type, encoding):
    send(fuzz_server, body, content_type, encoding)


def test_the_request_body_is_read_as_json_only_when_it_says_so(fuzz_server):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    assert send(fuzz_server, body, "text/plain", "").status_code == 415


def test_after_the_fuzzing_every_request_has_one_event_and_memory_held(fuzz_server):
    ids = fuzz_server["ids"]
    assert len(ids) >= 2 * EXAMPLES_PER_TEST
    health = httpx.get(f"{fuzz_server['url']}/healthz", timeout=10)
    assert health.status_code == 200  # still up
    connection.close()  # see the server's commits
    recorded = set()
    for start in range(0, len(ids), 500):
        recorded.update(
            AuditEvent.objects.filter(request_id__in=ids[start : start + 500]).values_list(
                "request_id", flat=True
            )
        )
    assert recorded == set(ids)
    assert AuditEvent.objects.filter(request_id__in=ids[:500]).count() == len(set(ids[:500]))
    grown = rss_kib(fuzz_server["pid"]) / fuzz_server["rss_before"] - 1
    assert grown < 0.05, f"the server's RSS grew {grown:.1%}"
    assert "Traceback" not in fuzz_server["log"].read_text(errors="replace")
