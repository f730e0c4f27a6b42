"""A scriptable MCP server on loopback that misbehaves on demand, and a bystander that records.

`FaultServer` answers like a small Streamable HTTP MCP server with one KB-shaped tool; a test
overrides one JSON-RPC method's answer (`server.on("tools/call", reply)`) or flips a switch (SSE,
session id, protocol version). Every request is recorded with its headers and body, so a test can
check what the client sent. `RecordingServer` is "another origin": it records anything that
reaches it, so a test can assert that nothing (and no Authorization header) ever did.
"""

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL = "ords.query.kb_select_ai_vpd"
MAX_DELAY = 10.0
MAX_STREAM_SECONDS = 30.0


def kb_tool(description: str = "Answers questions about the KB.") -> dict:
    return {
        "name": TOOL,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "minLength": 1, "maxLength": 2000},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            },
            "required": ["prompt"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
    }


def kb_answer(limit: int) -> dict:
    rows = [{"customer_id": f"C-{n:03d}", "name": f"고객{n}"} for n in range(1, min(limit, 3) + 1)]
    return {
        "columns": [{"name": "customer_id", "label": "고객 ID"}, {"name": "name", "label": "이름"}],
        "rows": rows,
        "row_count": len(rows),
        "truncated": False,
        "limit": limit,
        "masked_columns": [],
        "as_of": "2026-06-30",
        "stakeholder": {"id": "KB-P-001", "role": "planner", "branch_id": "BR-GN"},
        "interpretation": {"summary": "담당 고객 목록"},
    }


@dataclass
class Recorded:
    """One HTTP request as it arrived."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names; the first value of a repeated header
    body: bytes

    @property
    def message(self) -> dict | None:
        try:
            value = json.loads(self.body) if self.body else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def rpc_method(self) -> str:
        message = self.message or {}
        return message.get("method", "") if isinstance(message.get("method"), str) else ""


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0  # seconds before answering (a slow server)
    # A hostile answer written as it goes: these chunks (status line and headers included when
    # `raw`), `pause` seconds apart, for at most MAX_STREAM_SECONDS, until the client hangs up.
    chunks: Callable[[], Iterator[bytes]] | None = None
    pause: float = 0.0
    raw: bool = False

    @classmethod
    def json(cls, payload, status: int = 200, headers: dict | None = None, **kwargs) -> "Reply":
        return cls(
            status,
            {"Content-Type": "application/json", **(headers or {})},
            json.dumps(payload, ensure_ascii=False).encode(),
            **kwargs,
        )

    @classmethod
    def events(cls, events: list[dict | str], headers: dict | None = None, **kwargs) -> "Reply":
        """An SSE body: each event a dict of fields (data may be a dict, sent as JSON)."""
        chunks = []
        for event in events:
            if isinstance(event, str):
                chunks.append(event)
                continue
            lines = []
            for name, value in event.items():
                if name == "data" and not isinstance(value, str):
                    value = json.dumps(value, ensure_ascii=False)
                lines.append(f"{name}: {value}")
            chunks.append("\n".join(lines) + "\n\n")
        return cls(
            200,
            {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **(headers or {})},
            "".join(chunks).encode(),
            **kwargs,
        )


Handler = Callable[[Recorded, dict], Reply]


class FaultServer:
    """A small MCP server whose answers a test can replace one JSON-RPC method at a time."""

    def __init__(self):
        self.url = ""
        self.requests: list[Recorded] = []
        self.tools: list[dict] = [kb_tool()]
        self.protocol_version: str | None = None  # None: answer the version the client asked
        self.session_id: str | None = None  # issue this session id on initialize
        self.sse = False  # answer requests as an event stream instead of JSON
        self.get_handler: Callable[[Recorded], Reply] | None = None
        self._handlers: dict[str, Handler] = {}
        self._lock = threading.Lock()

    @property
    def mcp(self) -> str:
        return f"{self.url}/mcp"

    def on(self, rpc_method: str, handler: Handler | Reply) -> None:
        """Answer `rpc_method` with this reply (or what this function returns) from now on."""
        self._handlers[rpc_method] = handler if callable(handler) else (lambda rec, msg: handler)

    def rpc_requests(self, rpc_method: str | None = None) -> list[Recorded]:
        with self._lock:
            posts = [r for r in self.requests if r.method == "POST"]
        return [r for r in posts if rpc_method is None or r.rpc_method == rpc_method]

    def record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def answer(self, recorded: Recorded) -> Reply:
        if recorded.method == "GET":
            return self.get_handler(recorded) if self.get_handler else Reply(405)
        if recorded.method == "DELETE":
            return Reply(200 if self.session_id else 405)
        if recorded.method != "POST":
            return Reply(405)
        message = recorded.message
        if message is None:
            return Reply.json(_error(None, -32700, "Parse error"), status=400)
        method = recorded.rpc_method
        if (
            self.session_id
            and method != "initialize"
            and recorded.headers.get("mcp-session-id") != self.session_id
        ):
            return Reply.json(_error(None, -32000, "Bad session"), status=400)
        handler = self._handlers.get(method)
        if handler is not None:
            return handler(recorded, message)
        if "id" not in message:
            return Reply(202)
        result = self.default_result(method, message)
        if result is None:
            return Reply.json(_error(message["id"], -32601, "Method not found"))
        headers = {"Mcp-Session-Id": self.session_id} if self.session_id else {}
        response = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        if self.sse:
            progress = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
            return Reply.events([{"data": progress}, {"id": "1", "data": response}], headers)
        return Reply.json(response, headers=headers)

    def default_result(self, method: str, message: dict) -> dict | None:
        params = message.get("params") or {}
        if method == "initialize":
            return {
                "protocolVersion": self.protocol_version or params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fault-server", "version": "1.0"},
            }
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "tools/call":
            limit = (params.get("arguments") or {}).get("limit", 50)
            answer = kb_answer(limit)
            text = json.dumps(answer, ensure_ascii=False)
            return {"content": [{"type": "text", "text": text}], "structuredContent": answer}
        if method == "ping":
            return {}
        return None


class RecordingServer:
    """Another origin: records every request; answers a plausible initialize to tempt a client."""

    def __init__(self):
        self.url = ""
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()

    def record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def answer(self, recorded: Recorded) -> Reply:
        message = recorded.message or {}
        return Reply.json(
            {
                "jsonrpc": "2.0",
                "id": message.get("id"),
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "serverInfo": {"name": "elsewhere", "version": "1"},
                },
            }
        )

    @property
    def authorization_headers(self) -> list[str]:
        with self._lock:
            return [
                r.headers["authorization"] for r in self.requests if "authorization" in r.headers
            ]


def _error(rpc_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def _handler_class(app):
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # quiet
            pass

        def _handle(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {}
            for name, value in self.headers.items():
                headers.setdefault(name.lower(), value)
            recorded = Recorded(self.command, self.path, headers, body)
            app.record(recorded)
            reply = app.answer(recorded)
            if reply.delay:
                time.sleep(min(reply.delay, MAX_DELAY))
            if reply.chunks is not None:
                return self._stream(reply)
            try:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                if reply.body:
                    self.wfile.write(reply.body)
            except ConnectionError:
                pass  # the client gave up (a timeout test)

        def _stream(self, reply: Reply):
            self.close_connection = True
            deadline = time.monotonic() + MAX_STREAM_SECONDS
            try:
                if not reply.raw:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Connection", "close")
                    self.end_headers()
                for chunk in reply.chunks():
                    if time.monotonic() > deadline:
                        return
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    if reply.pause:
                        time.sleep(reply.pause)
            except (ConnectionError, OSError):
                pass  # the client gave up: what a bounded client must do

        do_GET = do_POST = do_DELETE = do_PUT = _handle

    return RequestHandler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        # A client that hangs up (a timeout test, a closed keep-alive connection) is not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serving(app, port: int = 0):
    """Serve `app` (a FaultServer or RecordingServer) on 127.0.0.1 (a free port unless given)."""
    httpd = _Server(("127.0.0.1", port), _handler_class(app))
    app.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield app
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
