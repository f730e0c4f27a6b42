"""Soak: the production profile under steady load, with its parts killed midway.

Sets up what the README's "Running at scale" describes, on this machine and on loopback only:
a throwaway PostgreSQL database owned by an ordinary login role, the KB reader role set up by a
DBA, a private Redis, a loopback stand-in for the egs2 Memory API, and two app hosts: host A is
`bin/serve --workers 2` (gunicorn with two web workers, a Celery worker and beat under
supervisor), host B a second web server on its own port, both against the same database and Redis.

Then it measures the mix's capacity, runs the mix at `--load` (80%) of it for `--duration`
seconds, and midway: six auditors ask for a chain check at once (one job, run by the Celery
worker), the Celery worker and one web worker are killed (SIGKILL), Redis is down for
`--redis-down` seconds, and host A's gunicorn master is killed (SIGKILL, as the OOM killer
would). At the end host A is stopped as Ctrl-C stops it. It reports requests by status,
unexpected 5xx, latency (and the median while Redis was down), how long host A took to serve
again after its master's death, RSS and PSS per process at the start and the end, the audit
chain check, and events created against events the Memory API received; it exits non-zero when
a check fails.

    .venv/bin/python bench/soak.py                      # 10 minutes
    .venv/bin/python bench/soak.py --duration 60        # what `make test` runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
TOOL = "ords.query.kb_select_ai_vpd"
APP_ROLE = "hyperbook_soak_app"
SINK_TOKEN = secrets.token_urlsafe(24)
# What each kind of request must get; anything else is counted as unexpected.
KINDS = {  # kind: (share of the mix, expected status)
    "call": (0.50, 200),
    "list": (0.25, 200),
    "bad_token": (0.10, 401),
    "wrong_origin": (0.10, 403),
    "suspended": (0.05, 403),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- the Memory API stand-in ---------------------------------------------------------------------


def signer_key(name: str) -> str:
    """A fresh checkpoint signer key, made by the project's own code (in the venv)."""
    code = (
        "import sys; from audit.signed_note import Signer;"
        "print(Signer.generate(sys.argv[1]).text())"
    )
    made = subprocess.run(
        [PYTHON, "-c", code, name], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return made.stdout.strip()


def assertion_key_file(path: Path) -> str:
    """A fresh key for the ORDS assertions (required in production), made by the project's code."""
    code = (
        "import sys, pathlib; from kb.assertions import signing_key_file_generated;"
        "signing_key_file_generated(pathlib.Path(sys.argv[1]))"
    )
    subprocess.run([PYTHON, "-c", code, str(path)], cwd=ROOT, check=True)
    return str(path)


class Sink:
    """Keeps memories by id, as the real API does (a second delivery is a duplicate)."""

    def __init__(self):
        self.ids: set[str] = set()  # audit events
        self.others: set[str] = set()  # signed checkpoints
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Authorization") != f"Bearer {SINK_TOKEN}":
                    return self._reply(401, {"error": "credential"})
                memories = json.loads(body)["memories"]
                with sink.lock:
                    results = []
                    for memory in memories:
                        # Audit events counted apart from the signed checkpoints.
                        kept = sink.ids if memory.get("kind") == "audit_event" else sink.others
                        status = "duplicate" if memory["id"] in kept else "created"
                        kept.add(memory["id"])
                        results.append({"id": memory["id"], "status": status})
                return self._reply(200, {"results": results})

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# --- a private Redis -----------------------------------------------------------------------------


class PrivateRedis:
    def __init__(self, folder: Path):
        self.port, self.folder, self.process = free_port(), folder, None
        self.binary = shutil.which("redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


# --- memory of processes -------------------------------------------------------------------------


def memory_of(pid: int) -> tuple[float, float, float] | None:
    """(RSS, PSS, USS) in MiB from /proc/PID/smaps_rollup, or None if the process is gone.

    PSS divides each shared page among the processes sharing it; USS (private pages) is what
    the process alone costs."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values: Counter = Counter()
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
            values[name] = int(rest.split()[0]) / 1024
    return values["Rss"], values["Pss"], values["Private_Clean"] + values["Private_Dirty"]


def process_group(pgid: int) -> list[int]:
    """The live processes of a process group (supervisor gives each program one of its own)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == pgid and state not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def port_is_free(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(found)


# --- the soak ------------------------------------------------------------------------------------


@dataclass
class Tally:
    statuses: Counter = field(default_factory=Counter)  # (kind, status) -> n
    latencies: list[float] = field(default_factory=list)  # seconds, valid requests
    sent_at: list[float] = field(default_factory=list)  # when each of them was sent (monotonic)
    errors: Counter = field(default_factory=Counter)  # connection-level failures by type

    @property
    def unexpected_5xx(self) -> int:
        return sum(n for (kind, status), n in self.statuses.items() if status >= 500)

    @property
    def unexpected(self) -> int:
        return sum(n for (kind, status), n in self.statuses.items() if status != KINDS[kind][1])


class Soak:
    def __init__(self, args):
        self.args = args
        self.stack = ExitStack()
        self.folder = Path(tempfile.mkdtemp(prefix="hyperbook-soak-"))
        self.database = f"hyperbook_soak_{os.getpid()}"
        self.events: list[str] = []
        self.redis_down: tuple[float, float] | None = None  # (from, to), monotonic
        self.master_killed: int | None = None  # the old master's pid (its process group)
        self.master_back_seconds: float | None = None
        self.verification_asks: list[str] = []

    # -- set-up, as the README's "Running at scale" says --

    def set_up(self):
        self.sink = Sink()
        self.stack.callback(self.sink.close)
        self.redis = PrivateRedis(self.folder)
        if not self.redis.binary:
            raise SystemExit("soak: redis-server is not installed")
        self.redis.start()
        self.stack.callback(self.redis.stop)
        admin = self.args.postgres
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]
            ).fetchone()
            if not exists:
                conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
            conn.execute(f"CREATE DATABASE {self.database} OWNER {APP_ROLE}")
        self.stack.callback(self._drop_database)
        base = psycopg.conninfo.conninfo_to_dict(admin)
        host, port = base.get("host", "127.0.0.1"), base.get("port", "5432")
        self.app_url = f"postgres://{APP_ROLE}@{host}:{port}/{self.database}"
        self.dba_url = admin.rsplit("/", 1)[0] + f"/{self.database}"
        self.ports = {"A": free_port(), "B": free_port()}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "hyperbook.settings.production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
            "TOKEN_FINGERPRINT_KEY": secrets.token_urlsafe(48),  # the same on every host
            "AUDIT_ORIGIN": "kb.soak.test/audit",
            "AUDIT_SIGNING_KEY": signer_key("kb.soak.test/audit"),
            "KB_ASSERTION_SIGNING_KEY_FILE": assertion_key_file(self.folder / "kb-assertion.pem"),
            "DATABASE_URL": self.app_url,
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": "",
            "HYPERBOOK_VAR_DIR": str(self.folder / "var-A"),
            "HYPERBOOK_PYTHON": PYTHON,
            "HOST": "127.0.0.1",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "MCP_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "MCP_ALLOWED_ORIGINS": ",".join(f"http://127.0.0.1:{p}" for p in self.ports.values()),
            "MCP_RESOURCE_URL": "https://kb.soak.test/mcp",
            "MCP_RATE_LIMIT": "1000000/minute",
            "MCP_AUTH_FAILURE_LIMIT": "1000000/minute",
            "EGS2_MEMORY_API_URL": self.sink.url,
            "EGS2_MEMORY_API_TOKEN": SINK_TOKEN,
            "AUDIT_DELIVERY_SWEEP_SECONDS": "2",
            "AUDIT_DELIVERY_MAX_BACKOFF_SECONDS": "5",
            "CELERY_LOG_LEVEL": "WARNING",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        self.manage("migrate", "--noinput", "-v0")
        self.manage("setup_kb_db_role", "--grant-to", APP_ROLE, database_url=self.dba_url)
        self.manage("collectstatic", "--noinput", "-v0")
        self.manage("import_mcp_servers", "config/mcp_servers.json")
        self.manage("load_kb_demo")
        self.manage("issue_demo_delegations", "--output", str(self.folder / "presets.json"))
        presets = json.loads((self.folder / "presets.json").read_text())
        self.tokens = {"planner": presets["KB-P-001"], "suspended": presets["KB-P-099"]}

    def _drop_database(self):
        with psycopg.connect(self.args.postgres, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")

    def manage(self, *args, database_url=None):
        env = dict(self.env)
        if database_url:
            env["DATABASE_URL"] = database_url
        result = subprocess.run(
            [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise SystemExit(f"soak: manage.py {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    # -- the two app hosts --

    def start_hosts(self):
        env_a = {**self.env, "PORT": str(self.ports["A"])}
        self.host_a = subprocess.Popen(
            [str(ROOT / "bin" / "serve"), "--workers", str(self.args.web_workers)],
            cwd=ROOT, env=env_a, stdout=open(self.folder / "host-A.log", "wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.stack.callback(self._stop, self.host_a, signal.SIGINT)  # Ctrl-C
        env_b = {
            **self.env,
            "PORT": str(self.ports["B"]),
            "WEB_WORKERS": "1",
            "HYPERBOOK_VAR_DIR": str(self.folder / "var-B"),
        }
        (self.folder / "var-B").mkdir(mode=0o700)
        self.host_b = subprocess.Popen(
            [PYTHON, "-m", "gunicorn", "hyperbook.asgi:application", "-c",
             "config/gunicorn.conf.py"],
            cwd=ROOT, env=env_b, stdout=open(self.folder / "host-B.log", "wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.stack.callback(self._stop, self.host_b, signal.SIGTERM)
        for name, port in self.ports.items():
            self._wait_healthy(name, port)

    def _wait_healthy(self, name: str, port: int):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                report = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()
                if report.get("checks", {}).get("database") and (
                    name == "B" or report.get("worker", {}).get("alive")
                ):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(1)
        raise SystemExit(f"soak: host {name} did not become healthy; see {self.folder}")

    @staticmethod
    def _stop(process: subprocess.Popen, sig):
        if process.poll() is None:
            os.killpg(process.pid, sig)
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def supervisor_pid(self, program: str) -> int:
        result = subprocess.run(
            [PYTHON, "-m", "supervisor.supervisorctl", "-c", "config/supervisord.conf", "pid",
             program],
            cwd=ROOT, env={**self.env, "PORT": str(self.ports["A"])}, capture_output=True,
            text=True, timeout=30, check=False,
        )  # fmt: skip
        value = result.stdout.strip()
        return int(value) if value.isdigit() else 0

    def processes(self) -> dict[str, int]:
        """role -> pid for every process of both hosts."""
        roles = {}
        web_a = self.supervisor_pid("web")
        roles["A gunicorn master"] = web_a
        for index, pid in enumerate(children_of(web_a), 1):
            roles[f"A web worker {index}"] = pid
        worker = self.supervisor_pid("worker")
        roles["A celery worker"] = worker
        for index, pid in enumerate(children_of(worker), 1):
            roles[f"A celery pool {index}"] = pid
        roles["A celery beat"] = self.supervisor_pid("beat")
        roles["B gunicorn master"] = self.host_b.pid
        for index, pid in enumerate(children_of(self.host_b.pid), 1):
            roles[f"B web worker {index}"] = pid
        return {role: pid for role, pid in roles.items() if pid}

    def memory(self) -> dict[str, tuple[int, float, float, float]]:
        snapshot = {}
        for role, pid in self.processes().items():
            measured = memory_of(pid)
            if measured:
                snapshot[role] = (pid, *measured)
        return snapshot

    # -- load --

    def request(self, kind: str, host: str) -> tuple[str, dict, dict]:
        url = f"http://127.0.0.1:{self.ports[host]}/mcp"
        headers = dict(HEADERS)
        if kind == "list":
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        else:
            prompt = random.choice(
                ["담당 고객 목록", "담당 고객의 보험료 상세를 보여줘", "계약 목록"]
            )
            arguments = {"prompt": prompt, "limit": 10}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": TOOL, "arguments": arguments}}  # fmt: skip
        token = {
            "bad_token": "hbvpd_" + secrets.token_urlsafe(32),
            "suspended": self.tokens["suspended"],
        }.get(kind, self.tokens["planner"])
        headers["Authorization"] = f"Bearer {token}"
        if kind == "wrong_origin":
            headers["Origin"] = "https://evil.example"
        return url, headers, body

    async def run_load(self, *, rate: float | None, seconds: float, events=()) -> Tally:
        """The mix at `rate` requests a second (None: as fast as `concurrency` clients go)."""
        tally = Tally()
        kinds = [k for k, (share, _) in KINDS.items() for _ in range(int(share * 100))]
        started = time.monotonic()
        next_slot = [started]
        pending_events = sorted(events)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)

        async def client_loop(client: httpx.AsyncClient, number: int):
            sent = 0
            while True:
                now = time.monotonic()
                if now - started >= seconds:
                    return
                if rate:
                    slot = next_slot[0]
                    next_slot[0] = slot + 1 / rate
                    if slot > now:
                        await asyncio.sleep(slot - now)
                kind = kinds[(number * 7919 + sent) % len(kinds)]
                host = "AB"[(number + sent) % 2]
                sent += 1
                url, headers, body = self.request(kind, host)
                begun = time.perf_counter()
                try:
                    response = await client.post(url, json=body, headers=headers, timeout=30)
                except httpx.HTTPError as exc:
                    tally.errors[type(exc).__name__] += 1
                    continue
                tally.statuses[(kind, response.status_code)] += 1
                if response.status_code == 200:
                    tally.latencies.append(time.perf_counter() - begun)
                    tally.sent_at.append(time.monotonic())

        async def event_loop():
            while pending_events:
                at, name, action = pending_events[0]
                wait = started + at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(min(wait, 0.5))
                    continue
                pending_events.pop(0)
                log(f"midway: {name}")
                self.events.append(f"{time.monotonic() - started:.0f}s {name}")
                await asyncio.to_thread(action)

        async with httpx.AsyncClient(limits=limits) as client:
            await asyncio.gather(
                *(client_loop(client, n) for n in range(self.args.concurrency)), event_loop()
            )
        return tally

    # -- the things killed midway --

    def kill_celery_worker(self):
        pid = self.supervisor_pid("worker")
        if pid:
            os.kill(pid, signal.SIGKILL)

    def kill_web_worker(self):
        workers = children_of(self.supervisor_pid("web"))
        if workers:
            os.kill(workers[0], signal.SIGKILL)

    def redis_goes_down(self):
        self.redis.stop()
        down = time.monotonic()
        time.sleep(self.args.redis_down)
        self.redis.start()
        self.redis_down = (down, time.monotonic())

    def auditors_ask_for_a_chain_check(self):
        """Six auditors press "verify" at once (the service the admin's button calls): one job
        is queued, for host A's Celery worker."""
        code = (
            "from audit.verification import verification_request;"
            "print(*[verification_request(full=False, requested_by=f'auditor-{n}')[0].pk"
            " for n in range(6)])"
        )
        self.verification_asks = self.manage("shell", "-v0", "-c", code).split()

    def chain_check_result(self) -> tuple[str | None, bool | None, str]:
        if not self.verification_asks:
            return None, None, "never asked for"
        code = (
            "import json; from audit.models import ChainVerification as V;"
            f"v = V.objects.get(pk={int(self.verification_asks[0])});"
            "print(json.dumps([v.state, v.ok, v.message]))"
        )
        state, ok, message = json.loads(self.manage("shell", "-v0", "-c", code))
        return state, ok, message

    def kill_web_master(self):
        """What the OOM killer does to the largest process. Waits (30 s at most) for a new
        master to serve /mcp and for every process of the old one's group to be gone."""
        master = self.supervisor_pid("web")
        os.kill(master, signal.SIGKILL)
        self.master_killed, killed_at = master, time.monotonic()
        url, headers, body = self.request("list", "A")
        while time.monotonic() - killed_at < 30:
            new = self.supervisor_pid("web")
            if new not in (0, master) and not process_group(master):
                try:
                    if httpx.post(url, json=body, headers=headers, timeout=5).status_code == 200:
                        self.master_back_seconds = time.monotonic() - killed_at
                        return
                except httpx.HTTPError:
                    pass
            time.sleep(0.5)

    # -- after --

    def wait_for_delivery(self, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.events_created() <= len(self.sink.ids):
                break
            time.sleep(2)
        return len(self.sink.ids)

    def events_created(self) -> int:
        with psycopg.connect(self.dba_url) as conn:
            return conn.execute("SELECT count(*) FROM audit_auditevent").fetchone()[0]

    def chain_report(self) -> tuple[bool, str]:
        result = subprocess.run(
            [PYTHON, "manage.py", "verify_audit_chain"], cwd=ROOT, env=self.env,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        return result.returncode == 0, (result.stdout or result.stderr).strip()[-300:]

    def close(self):
        self.stack.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600, help="seconds of steady load")
    parser.add_argument("--load", type=float, default=0.8, help="fraction of measured capacity")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients")
    parser.add_argument("--redis-down", type=float, default=6, help="seconds Redis is down")
    parser.add_argument(
        "--postgres", default="postgres://postgres@127.0.0.1:5432/postgres",
        help="an administrator's URL; a throwaway database is made and dropped",
    )  # fmt: skip
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()

    soak = Soak(args)
    failures: list[str] = []
    try:
        log("setting up PostgreSQL, Redis, the Memory API stand-in and two app hosts")
        soak.set_up()
        soak.start_hosts()
        asyncio.run(soak.run_load(rate=None, seconds=3))  # warm every worker's caches
        probe = min(10.0, max(3.0, args.duration / 10))
        measured = asyncio.run(soak.run_load(rate=None, seconds=probe))
        capacity = sum(measured.statuses.values()) / probe
        rate = capacity * args.load
        log(f"capacity {capacity:.0f} req/s; soaking at {rate:.0f} req/s for {args.duration:.0f}s")
        memory_start = soak.memory()
        half = args.duration / 2
        events = [
            (half - 15, "six auditors ask for a chain check", soak.auditors_ask_for_a_chain_check),
            (half - 5, "kill -9 the Celery worker", soak.kill_celery_worker),
            (half, "kill -9 one web worker of host A", soak.kill_web_worker),
            (half + 5, f"Redis down for {args.redis_down:.0f}s", soak.redis_goes_down),
            (half + 15, "kill -9 host A's gunicorn master", soak.kill_web_master),
        ]
        tally = asyncio.run(soak.run_load(rate=rate, seconds=args.duration, events=events))
        load_ended = time.monotonic()
        backlog_at_end = soak.events_created() - len(soak.sink.ids)
        delivered = soak.wait_for_delivery(600)
        drain_seconds = time.monotonic() - load_ended
        created = soak.events_created()
        memory_end = soak.memory()
        chain_ok, chain_message = soak.chain_report()
        check_state, check_ok, check_message = soak.chain_check_result()
    finally:
        soak.close()
    # After Ctrl-C (host A) and SIGTERM (host B): nothing of either listens any more.
    ports_held = [name for name, port in soak.ports.items() if not port_is_free(port)]
    orphans = process_group(soak.master_killed) if soak.master_killed else []

    total = sum(tally.statuses.values())
    print()
    print(f"soak: {args.duration:.0f}s at {rate:.0f} req/s ({args.load:.0%} of {capacity:.0f})")
    print(f"midway: {'; '.join(soak.events)}")
    print(f"requests: {total:,}; by kind and status:")
    for (kind, status), count in sorted(tally.statuses.items()):
        mark = "" if status == KINDS[kind][1] else "   <- unexpected"
        print(f"  {kind:13} {status}  {count:8,}{mark}")
    if tally.errors:
        print(f"connection errors (in flight at a kill): {dict(tally.errors)}")
    p50, p99 = percentile(tally.latencies, 0.5), percentile(tally.latencies, 0.99)
    print(f"latency of 200s: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    if soak.redis_down:
        down, up = soak.redis_down
        during = [
            t for t, at in zip(tally.latencies, tally.sent_at, strict=True) if down <= at <= up
        ]
        p50_down = percentile(during, 0.5)
        print(
            f"latency while Redis was down: p50 {p50_down * 1000:.1f} ms ({len(during)} requests)"
        )
    back = soak.master_back_seconds
    print(
        "host A after its master was killed: "
        + (f"served by a new master within {back:.1f}s" if back is not None else "NOT BACK")
        + f"; processes of the old master's group left: {len(orphans)}"
    )
    print(f"six auditors' chain check: {len(set(soak.verification_asks))} job, {check_state}, "
          f"{'ok' if check_ok else check_ok} ({check_message})")  # fmt: skip
    print(f"ports still held after the stop: {ports_held or 'none'}")
    print(f"unexpected 5xx: {tally.unexpected_5xx}")
    print("memory, MiB (start -> end):")
    print(f"  {'process':22} {'RSS':>17} {'PSS':>17} {'USS (private)':>17}")
    for role in sorted(set(memory_start) | set(memory_end)):
        start, end = memory_start.get(role), memory_end.get(role)
        replaced = " (replaced)" if start and end and start[0] != end[0] else ""
        columns = [
            f"{start[i] if start else 0:7.0f} -> {end[i] if end else 0:7.0f}" for i in (1, 2, 3)
        ]
        print(f"  {role:22} {' '.join(columns)}{replaced}")
    # What a second web worker costs: host A (master + 2 workers) against host B (master + 1),
    # the same app on the same machine, in PSS, which counts every page once in all.
    host_a = sum(m[2] for r, m in memory_start.items() if r.startswith("A g") or "A web" in r)
    host_b = sum(m[2] for r, m in memory_start.items() if r.startswith("B "))
    second = memory_start.get("A web worker 2")
    marginal = host_a - host_b
    print(
        f"a second web worker adds {marginal:.0f} MiB (PSS of host A's web processes "
        f"{host_a:.0f} - host B's {host_b:.0f}); its own private memory (USS): "
        f"{second[3] if second else float('nan'):.0f} MiB"
    )
    print(f"audit chain: {'intact' if chain_ok else 'BROKEN'} ({chain_message})")
    print(
        f"audit events: {created:,} created, {delivered:,} delivered to the Memory API "
        f"({backlog_at_end:,} still to deliver when the load stopped, delivered within "
        f"{drain_seconds:.0f}s)"
    )

    if tally.unexpected_5xx:
        failures.append(f"{tally.unexpected_5xx} unexpected 5xx")
    if soak.redis_down and not p50_down <= 2 * p50:
        failures.append(
            f"p50 while Redis was down {p50_down * 1000:.0f} ms (> 2x {p50 * 1000:.0f})"
        )
    if back is None:
        failures.append("host A did not serve /mcp within 30 s of its master's death")
    if orphans:
        failures.append(f"{len(orphans)} processes of the killed master's group survive")
    if ports_held:
        failures.append(f"ports still held after the stop: {ports_held}")
    if len(set(soak.verification_asks)) != 1 or (check_state, check_ok) != ("done", True):
        failures.append(f"the auditors' chain check: {soak.verification_asks} {check_state}")
    if not chain_ok:
        failures.append("the audit chain is not intact")
    if delivered < created:
        failures.append(f"{created - delivered} audit events were not delivered")
    if host_b and marginal > 150:
        failures.append(f"a second web worker adds {marginal:.0f} MiB (> 150)")
    for role, start in memory_start.items():
        end = memory_end.get(role)
        if end and end[0] == start[0] and role.endswith(("worker 1", "worker 2", "master")):
            if end[2] > start[2] * 1.10 + 5:  # + 5 MiB: small processes move by a few pages
                failures.append(f"{role} PSS grew {start[2]:.0f} -> {end[2]:.0f} MiB (> 10%)")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "capacity": capacity,
                    "rate": rate,
                    "statuses": {f"{k} {s}": n for (k, s), n in tally.statuses.items()},
                    "errors": dict(tally.errors),
                    "p50_ms": p50 * 1000,
                    "p99_ms": p99 * 1000,
                    "memory_start": memory_start,
                    "memory_end": memory_end,
                    "second_web_worker_mib": marginal,
                    "chain_ok": chain_ok,
                    "master_back_seconds": back,
                    "p50_redis_down_ms": p50_down * 1000 if soak.redis_down else None,
                    "created": created,
                    "delivered": delivered,
                    "failures": failures,
                },
                indent=2,
            )
        )
    print("soak: " + ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
