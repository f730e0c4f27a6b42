"""A loopback stand-in for the egs2 Memory API that can be told to misbehave."""

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class MemorySink:
    """Keeps memories by id like the real API (a second delivery is a duplicate, and the copy
    first stored stays).

    GET /v1/memories/{id} reads a memory back, as stored (plus `stored_at`).
    `faults` is a list consumed one per POST: "down" (drop the connection), "500", "slow",
    "429", "garbage", "401", "413", "reject_first" (reject the batch's first item), "slow_store"
    (store, then answer late), "echo_400" and "echo_reject" (refuse the batch, or its first item,
    in words that quote the Authorization header and the bearer in it), or None (ok).
    """

    def __init__(self, token: str, slow_seconds: float = 3.0):
        self.token = token
        self.slow_seconds = slow_seconds
        self.faults: list[str | None] = []
        self.memories: dict[str, dict] = {}
        self.receipts: Counter = Counter()  # id -> times received in a successful request
        self.rejected: set[str] = set()
        self.raw_bodies: list[bytes] = []
        self.auth_headers: list[str] = []
        self.reads: list[str] = []  # ids read back (GET /v1/memories/{id})
        self.requests = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def of_kind(self, kind: str = "audit_event") -> dict[str, dict]:
        """The memories of one kind (audit events, or signed checkpoints), by id."""
        with self.lock:
            return {i: m for i, m in self.memories.items() if m.get("kind") == kind}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def next_fault(self) -> str | None:
        with self.lock:
            self.requests += 1
            return self.faults.pop(0) if self.faults else None

    def _handler(self):
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                prefix = "/v1/memories/"
                if not self.path.startswith(prefix):
                    return self._reply(404, {"error": "not found"})
                if self.headers.get("Authorization") != f"Bearer {sink.token}":
                    return self._reply(401, {"error": "bad credential"})
                with sink.lock:
                    sink.reads.append(self.path[len(prefix) :])
                    memory = sink.memories.get(self.path[len(prefix) :])
                if memory is None:
                    return self._reply(404, {"error": "no such memory"})
                return self._reply(200, {**memory, "stored_at": "2026-12-01T00:00:00Z"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                with sink.lock:
                    sink.raw_bodies.append(body)
                    sink.auth_headers.append(self.headers.get("Authorization", ""))
                if self.path != "/v1/memories":
                    return self._reply(404, {"error": "not found"})
                if self.headers.get("Authorization") != f"Bearer {sink.token}":
                    return self._reply(401, {"error": "bad credential"})
                fault = sink.next_fault()
                if fault == "down":
                    self.connection.close()
                    return None
                if fault == "slow":
                    time.sleep(sink.slow_seconds)
                    return self._reply(503, {"error": "slow"})
                if fault == "slow_store":  # stores the batch, but answers late
                    time.sleep(sink.slow_seconds)
                if fault in ("500", "401", "413"):
                    return self._reply(int(fault), {"error": fault})
                if fault == "429":
                    return self._reply(429, {"error": "slow down"}, {"Retry-After": "1"})
                echoed = self.headers.get("Authorization", "")
                echo = f"refused Authorization: {echoed} (credential {echoed.split()[-1]})"
                if fault == "echo_400":
                    return self._reply(400, {"error": "x" * 140 + echo})
                if fault == "garbage":
                    return self._raw(200, b"<html>not json")
                memories = json.loads(body)["memories"]
                results = []
                for index, memory in enumerate(memories):
                    if fault in ("reject_first", "echo_reject") and index == 0:
                        sink.rejected.add(memory["id"])
                        error = echo if fault == "echo_reject" else "content: bad"
                        results.append({"id": memory["id"], "status": "rejected", "error": error})
                        continue
                    with sink.lock:  # like the real API, it keeps the first copy of an id
                        duplicate = memory["id"] in sink.memories
                        sink.memories.setdefault(memory["id"], memory)
                        sink.receipts[memory["id"]] += 1
                    results.append(
                        {"id": memory["id"], "status": "duplicate" if duplicate else "created"}
                    )
                partial = fault in ("reject_first", "echo_reject")
                return self._reply(207 if partial else 200, {"results": results})

            def _reply(self, status, payload, headers=None):
                return self._raw(status, json.dumps(payload).encode(), headers)

            def _raw(self, status, data, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler
