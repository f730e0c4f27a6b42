"""Audit delivery catching up: an outage, a flaky recovery, and a healthy drain.

Against a loopback stand-in for the egs2 Memory API that misbehaves like the one the delivery
rules were written against (during recovery every third POST answers 503 and every seventh stalls
past the client's timeout after storing the batch), it:

1. queues `--events` (1,500) events while the stand-in is down for `--outage` (60) seconds;
2. brings it back, flaky, and measures how long until every event is delivered (target: 120 s);
3. queues the same number again against a healthy stand-in and measures the drain rate
   (target: 200 events/s).

Delivery runs as the Celery worker runs it (`audit.delivery.deliver_pending` with the worker's
time budget, started again every AUDIT_DELIVERY_SWEEP_SECONDS by beat), in this process, on a
throwaway SQLite database. Loopback only; bounded by the outage and a 10-minute limit.

    .venv/bin/python bench/delivery_bench.py
    .venv/bin/python bench/delivery_bench.py --quick      # a 10 s outage, 300 events
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "bench-memory-api-credential-0123456789"  # noqa: S105  (the stand-in's own)
TIMEOUT_SECONDS = 2  # the client's timeout; a stalled POST waits longer than this


class StandIn:
    """down: every POST fails; flaky: every third 503, every seventh stores then stalls."""

    def __init__(self):
        self.mode = "down"
        self.ids: set[str] = set()
        self.posts = 0
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with stand_in.lock:
                    stand_in.posts += 1
                    number, mode = stand_in.posts, stand_in.mode
                if mode == "down":
                    return self._reply(503, {"error": "down"})
                if mode == "flaky" and number % 3 == 0:
                    return self._reply(503, {"error": "flaky"})
                memories = json.loads(body)["memories"]
                with stand_in.lock:
                    stand_in.ids.update(m["id"] for m in memories)
                if mode == "flaky" and number % 7 == 0:
                    time.sleep(TIMEOUT_SECONDS + 1)  # stored, but answers too late
                results = [{"id": m["id"], "status": "created"} for m in memories]
                return self._reply(200, {"results": results})

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def set_up_django(folder: str, sink_url: str):
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
            "DATABASE_URL": f"sqlite:///{folder}/delivery-bench.sqlite3",
            "EGS2_MEMORY_API_URL": sink_url,
            "EGS2_MEMORY_API_TOKEN": TOKEN,
            "EGS2_MEMORY_API_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
            "LOG_LEVEL": "ERROR",
        }
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    # The test settings name a test database; this run uses the file above as it is.
    settings.DATABASES["default"]["NAME"] = f"{folder}/delivery-bench.sqlite3"
    call_command("migrate", verbosity=0)


class Worker:
    """What the Celery worker and beat do: run the delivery task again every sweep interval, or
    at once when nudged (the web process sends a "deliver soon" message when it appends)."""

    def __init__(self):
        from django.conf import settings

        self.sweep = settings.AUDIT_DELIVERY_SWEEP_SECONDS
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def nudge(self):
        self.wake.set()

    def _run(self):
        from django.db import connection

        from audit.delivery import deliver_pending

        while not self.stop.is_set():
            self.wake.clear()
            deliver_pending(time_budget_seconds=60)
            self.wake.wait(self.sweep)
        connection.close()


def append(count: int):
    from audit.services import audit_events_append

    for start in range(0, count, 100):
        audit_events_append(
            events=[
                {"action": "mcp.tools_call", "outcome": "allowed"}
                for _ in range(min(100, count - start))
            ]
        )


def delivered() -> int:
    from audit.models import Delivery

    return Delivery.objects.filter(state=Delivery.State.DELIVERED).count()


def wait_delivered(target: int, limit: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if delivered() >= target:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--outage", type=float, default=60)
    parser.add_argument("--quick", action="store_true", help="--events 300 --outage 10")
    args = parser.parse_args()
    if args.quick:
        args.events, args.outage = 300, 10
    stand_in = StandIn()
    with tempfile.TemporaryDirectory() as folder:
        set_up_django(folder, stand_in.url)
        worker = Worker()
        worker.thread.start()
        append(args.events)
        worker.nudge()
        print(f"outage: {args.events:,} events queued, the Memory API down for {args.outage:.0f}s")
        time.sleep(args.outage)
        stand_in.mode = "flaky"
        posts_before = stand_in.posts
        recovery = wait_delivered(args.events, 600)
        flaky_posts = stand_in.posts - posts_before
        stand_in.mode = "ok"
        append(args.events)
        started = time.monotonic()
        worker.nudge()
        drained = wait_delivered(2 * args.events, 600)
        drain_seconds = time.monotonic() - started if drained is not None else None
        worker.stop.set()
        worker.nudge()
        worker.thread.join(timeout=90)
    rate = args.events / drain_seconds if drain_seconds else 0.0
    print(
        f"recovery (every 3rd POST 503, every 7th stalls {TIMEOUT_SECONDS + 1}s after storing): "
        + (f"all delivered {recovery:.1f}s after the outage" if recovery else "NOT all delivered")
        + f" ({flaky_posts} POSTs); target 120 s"
    )
    print(
        f"healthy drain: {args.events:,} events in {drain_seconds or float('nan'):.1f}s = "
        f"{rate:,.0f} events/s; target 200 events/s"
    )
    ok = recovery is not None and recovery <= 120 and rate >= 200
    print("delivery bench: " + ("targets met" if ok else "TARGETS MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
