"""Benchmark our /mcp against a bare official-SDK server, side by side on this machine.

    .venv/bin/python bench/mcp_bench.py                 # 10 s a run, tools/list + tools/call, c=1,8
    .venv/bin/python bench/mcp_bench.py --duration 5 --methods tools/list
    .venv/bin/python bench/mcp_bench.py --with-no-audit # also ours with AUDIT_MCP_REQUESTS=0
    .venv/bin/python bench/mcp_bench.py --variant small:MCP_MAX_BODY_BYTES=4096
                                                        # also ours[small] with that environment
    .venv/bin/python bench/mcp_bench.py --profile DIR   # then py-spy passes (not measured)
    .venv/bin/python bench/mcp_bench.py --methods tools/call --repeat 5 --source before=/tmp/old
                                                        # also ours[before] from another tree

What runs (everything on 127.0.0.1, bounded, cleaned up at the end):
  * a throwaway SQLite database in a temp dir (or, with --postgres URL, a throwaway PostgreSQL
    database on that server): `manage.py migrate`, then one stakeholder and one
    delegation (`manage.py load_kb_demo`, then one delegation for KB-P-001);
  * "ours": `uvicorn hyperbook.asgi:application` (1 worker, --no-access-log), our gate + the SDK's
    low-level Server, MCP_RATE_LIMIT set so high that the rate limiter never refuses;
  * "bare": `mcp.server.mcpserver.MCPServer(stateless_http=True, json_response=True)`, SDK logging
    at WARNING, one `async def` tool `ords.query.kb_select_ai_vpd(prompt: str, limit: int)` that
    returns a fixed answer;
  * the load: authenticated POSTs of `tools/list` and `tools/call` (MCP-Protocol-Version
    2025-11-25) with 1 and 8 keep-alive connections, by `wrk` when installed, else by a Python
    asyncio keep-alive client (labelled as such; its numbers are lower-bounded by its own cost).
Servers are pinned to core 0 and the load generator to core 1 (taskset); bench/README.md says
how to read the output, README.md's Performance section has reference figures. Numbers are only
comparable within one run: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
LUA_SCRIPT = BENCH_DIR / "wrk_mcp.lua"
TOOL = "ords.query.kb_select_ai_vpd"
PROMPT = "담당 고객의 보험료 상세를 보여줘"
PROTOCOL_VERSION = "2025-11-25"
RESULT_PREFIX = "MCP_BENCH_RESULT "
TMP_PREFIX = "hyperbook-mcp-bench-"
# High enough that the per-delegation limiter never refuses a benchmark request.
RATE_LIMIT_OFF = "100000000/second"
TARGET_LIST_RATIO = 0.6
TARGET_P99_MS = 20.0
# Share of throughput the audit event may cost (1 - ours / ours[no-audit], req/s) at c=8.
TARGET_AUDIT_COST = {"tools/list": 0.15, "tools/call": 0.10}

# What the bare server's tool (and ours with --stub-engine) returns: a small, fixed answer.
FIXED_ANSWER = {
    "question": PROMPT,
    "row_count": 2,
    "columns": ["customer_id", "customer_name", "monthly_premium"],
    "rows": [["C-0001", "김*수", 52000], ["C-0002", "이*영", 87000]],
    "masked_columns": ["customer_name"],
    "interpretation": "bench fixed answer",
}


# --------------------------------------------------------------------------------------------
# ASGI applications, imported by uvicorn in the server processes (uvicorn --app-dir bench).
# --------------------------------------------------------------------------------------------


def bare_app():
    """uvicorn --factory mcp_bench:bare_app — the official SDK alone, as documented."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bare-bench", log_level="WARNING")

    @server.tool(name=TOOL)
    async def kb_select_ai_vpd(prompt: str, limit: int) -> dict:
        return FIXED_ANSWER

    return server.streamable_http_app(stateless_http=True, json_response=True)


def ours_app():
    """uvicorn --factory mcp_bench:ours_app — hyperbook.asgi:application with stand-ins.

    Only used for the labelled "ours[stub-engine]" rows (MCP_BENCH_STUBS=engine): the gate, the
    SDK and the DB-thread hop are the real ones; only kb.answering is replaced.
    """
    import types

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hyperbook.settings.test")
    stubs = set(filter(None, os.environ.get("MCP_BENCH_STUBS", "").split(",")))
    if "engine" in stubs:
        module = types.ModuleType("kb.answering")

        def answer_question(
            *, stakeholder_id: str, prompt: str, limit: int, delegation_id: int | None = None
        ) -> dict:
            return FIXED_ANSWER

        def answer(asker, question, *, delegation_id: int | None = None) -> dict:
            return FIXED_ANSWER

        module.answer_question = answer_question
        module.answer = answer
        module.warm_up = lambda: None  # the server warms the engine up at start
        sys.modules["kb.answering"] = module
    from hyperbook.asgi import application

    return application


# --------------------------------------------------------------------------------------------
# Process helpers
# --------------------------------------------------------------------------------------------


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM if this benchmark process dies (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: S110 - best effort; cleanup in finally still applies
        pass


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Versions negotiated with an initialize handshake; later ones carry the envelope in params._meta.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def rpc_body(method: str, protocol_version: str = PROTOCOL_VERSION, prompt: str = PROMPT) -> str:
    message: dict = {"jsonrpc": "2.0", "id": 1, "method": method}
    params: dict = {}
    if method == "tools/call":
        params = {"name": TOOL, "arguments": {"prompt": prompt, "limit": 10}}
    if protocol_version not in HANDSHAKE_VERSIONS:
        # The 2026-07-28 request path: no handshake, so every request says who is asking.
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": protocol_version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    message["params"] = params
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def rpc_bodies(method: str, protocol_version: str, prompts: str) -> list[str]:
    """The bodies a run cycles through: tools/call asks the varied prompt set of
    selectai_bench.py in turn (so nothing that remembers one prompt can make the number), or the
    one fixed PROMPT with --prompts fixed."""
    if method != "tools/call" or prompts == "fixed":
        return [rpc_body(method, protocol_version)]
    from selectai_bench import PROMPTS as VARIED  # bench/ is on sys.path when run as a script

    return [rpc_body(method, protocol_version, prompt) for _, prompt in VARIED]


def mcp_headers(token: str, protocol_version: str, method: str = "") -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": protocol_version,
    }
    if method and protocol_version not in HANDSHAKE_VERSIONS:
        # The 2026-07-28 path routes on these and checks them against the body.
        headers["Mcp-Method"] = method
        if method == "tools/call":
            headers["Mcp-Name"] = TOOL
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads), from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class ServerProcess:
    name: str
    label: str
    port: int
    log_path: Path
    process: subprocess.Popen
    note: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@dataclass
class RunResult:
    server: str
    method: str
    concurrency: int
    loadgen: str
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    non2xx: int
    socket_errors: int
    rpc_errors: int
    tool_errors: int
    checked: int
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        self.db_path = self.tmp / "bench.sqlite3"
        self.database_url = f"sqlite:///{self.db_path}"
        self.postgres_database = ""
        if args.postgres:
            self.database_url = self._create_postgres_database(args.postgres)
        self.servers: list[ServerProcess] = []
        self.notes: list[str] = []
        self.token = ""
        pin = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2 and not args.no_pin
        self.server_pin = ["taskset", "-c", "0"] if pin else []
        self.load_pin = ["taskset", "-c", "1"] if pin else []
        if not pin:
            self.notes.append("not pinned (no taskset, a single core, or --no-pin)")
        wrk = shutil.which("wrk")
        if args.loadgen == "wrk" and wrk is None:
            raise SystemExit("--loadgen wrk: wrk is not installed (Debian: apt-get install wrk)")
        self.loadgen = "wrk" if (args.loadgen in ("auto", "wrk") and wrk) else "python"
        if self.loadgen == "python":
            self.notes.append(
                "load generator: Python asyncio keep-alive client (FALLBACK: wrk not found); "
                "it shares nothing with the servers but is slower than wrk, so absolute req/s "
                "may be capped by the client — compare the ratios"
            )

    # --- setup ---------------------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
            "DATABASE_URL": self.database_url,
            "HYPERBOOK_VAR_DIR": str(self.tmp / "var"),
            "MCP_RATE_LIMIT": RATE_LIMIT_OFF,
            "MCP_AUTH_FAILURE_LIMIT": RATE_LIMIT_OFF,
            "REDIS_URL": "",  # the in-process rate limiter: the bench measures one worker alone
            "EGS2_MEMORY_API_URL": "",  # audit events stay pending: nothing leaves this machine
            # The embedded engine with the built-in parser: no model or ORDS call from a bench.
            "KB_QUERY_BACKEND": "embedded",
            "SELECT_AI_PROVIDER": "builtin",
            "LOG_LEVEL": self.args.log_level,
        }
        env.pop("MCP_BENCH_STUBS", None)
        return env

    def prepare_database(self) -> None:
        env = self.base_env()
        (self.tmp / "var").mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--_prepare"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise RuntimeError(f"database preparation failed:\n{out.stderr[-3000:]}")
        line = next((x for x in out.stdout.splitlines() if x.startswith(RESULT_PREFIX)), None)
        if line is None:
            raise RuntimeError(f"database preparation printed no result:\n{out.stderr[-3000:]}")
        prepared = json.loads(line[len(RESULT_PREFIX) :])
        self.token = prepared.pop("token")
        self.notes.append(
            f"database: throwaway "
            f"{'PostgreSQL ' + self.postgres_database if self.postgres_database else 'SQLite'} "
            f"(temp dir {self.tmp}; manage.py load_kb_demo; "
            f"stakeholder {prepared['stakeholder']}, {time.monotonic() - started:.1f} s)"
        )

    def start_server(
        self,
        name: str,
        label: str,
        stubs: str = "",
        note: str = "",
        env_extra: dict | None = None,
        root: Path = ROOT,
    ) -> ServerProcess:
        port = free_port()
        env = {**self.base_env(), **(env_extra or {})}
        uvicorn = [sys.executable, "-m", "uvicorn"]
        common = ["--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--no-access-log"]
        if name == "bare":
            target = ["--app-dir", str(BENCH_DIR), "--factory", "mcp_bench:bare_app"]
        elif stubs:
            env["MCP_BENCH_STUBS"] = stubs
            target = ["--app-dir", str(BENCH_DIR), "--factory", "mcp_bench:ours_app"]
        else:
            target = ["hyperbook.asgi:application"]
        log_path = self.tmp / f"server-{label.replace('[', '-').replace(']', '')}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                self.server_pin + uvicorn + target + common,
                cwd=root,
                env=env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,  # noqa: PLW1509
            )
        server = ServerProcess(name, label, port, log_path, process, note)
        self.servers.append(server)
        self._wait_ready(server)
        return server

    def _wait_ready(self, server: ServerProcess) -> None:
        import httpx

        deadline = time.monotonic() + 90
        headers = mcp_headers(self.token, self.args.protocol_version, "tools/list")
        body = rpc_body("tools/list", self.args.protocol_version).encode()
        last = ""
        while True:
            if server.process.poll() is not None:
                raise RuntimeError(
                    f"{server.label} exited early:\n{server.log_path.read_text()[-3000:]}"
                )
            try:
                response = httpx.post(server.url, content=body, headers=headers, timeout=5)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}: {response.text[:300]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{server.label} did not become ready ({last}):\n"
                    f"{server.log_path.read_text()[-3000:]}"
                )
            time.sleep(0.25)

    def probe(self, server: ServerProcess, method: str) -> str:
        """One request outside the timed runs: what does this server answer?"""
        import httpx

        response = httpx.post(
            server.url,
            content=rpc_body(method, self.args.protocol_version).encode(),
            headers=mcp_headers(self.token, self.args.protocol_version, method),
            timeout=30,
        )
        if response.status_code != 200:
            return f"HTTP {response.status_code}: {response.text[:200]}"
        try:
            payload = response.json()
        except ValueError:
            return f"non-JSON 200 response: {response.text[:200]}"
        if "error" in payload:
            return f"JSON-RPC error: {json.dumps(payload['error'], ensure_ascii=False)[:200]}"
        result = payload.get("result", {})
        if method == "tools/call" and result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []))
            return f"tool error (isError): {text[:200]}"
        if method == "tools/list":
            return f"ok: {len(result.get('tools', []))} tool(s), {len(response.content)} bytes"
        return f"ok: {len(response.content)} bytes"

    # --- load --------------------------------------------------------------------------------

    def load(
        self,
        server: ServerProcess,
        method: str,
        concurrency: int,
        duration: float,
        check: bool,
        extra_cmd_prefix: list[str] | None = None,
    ) -> RunResult:
        env = {
            **os.environ,
            # JSON has no raw newline, so one body a line.
            "MCP_BENCH_BODY": "\n".join(
                rpc_bodies(method, self.args.protocol_version, self.args.prompts)
            ),
            "MCP_BENCH_TOKEN": self.token,
            "MCP_BENCH_PV": self.args.protocol_version,
            "MCP_BENCH_CHECK": "1" if check else "0",
            "MCP_BENCH_METHOD": method,
        }
        routing = {
            k: v
            for k, v in mcp_headers("", self.args.protocol_version, method).items()
            if k.lower().startswith("mcp-") and k != "MCP-Protocol-Version"
        }
        env["MCP_BENCH_HEADERS"] = "\n".join(f"{k}: {v}" for k, v in routing.items())
        if self.loadgen == "wrk":
            command = self.load_pin + [
                "wrk",
                "-t1",
                f"-c{concurrency}",
                f"-d{max(1, round(duration))}s",
                "--timeout",
                "5s",
                "-s",
                str(LUA_SCRIPT),
                server.url,
            ]
        else:
            command = self.load_pin + [
                sys.executable,
                str(Path(__file__).resolve()),
                "--_loadgen",
                "--url",
                server.url,
                "--concurrency",
                str(concurrency),
                "--duration",
                str(duration),
            ]
        out = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=duration + 60
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith(RESULT_PREFIX)), None)
        if line is None:
            raise RuntimeError(
                f"load generator printed no result (exit {out.returncode}):\n"
                f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
            )
        raw = json.loads(line[len(RESULT_PREFIX) :])
        seconds = raw["duration_us"] / 1e6
        return RunResult(
            server=server.label,
            method=method,
            concurrency=concurrency,
            loadgen=self.loadgen,
            requests=raw["requests"],
            duration_s=round(seconds, 3),
            rps=raw["requests"] / seconds if seconds else 0.0,
            p50_ms=raw["p50_us"] / 1000,
            p90_ms=raw["p90_us"] / 1000,
            p99_ms=raw["p99_us"] / 1000,
            max_ms=raw["max_us"] / 1000,
            non2xx=raw["non2xx"],
            socket_errors=raw["connect_errors"]
            + raw["read_errors"]
            + raw["write_errors"]
            + raw["timeouts"],
            rpc_errors=raw["rpc_errors"],
            tool_errors=raw["tool_errors"],
            checked=raw["checked"],
        )

    # --- orchestration -----------------------------------------------------------------------

    def run(self) -> list[RunResult]:
        args = self.args
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
        wanted = {s.strip() for s in args.servers.split(",") if s.strip()}

        self.prepare_database()

        if "bare" in wanted:
            self.start_server("bare", "bare")
        if "ours" in wanted:
            self.start_server("ours", "ours")
        if "ours" in wanted and args.stub_engine == "yes" and "tools/call" in methods:
            self.start_server(
                "ours",
                "ours[stub-engine]",
                stubs="engine",
                note="kb.answering's answer functions replaced by one returning the bare "
                "server's fixed answer (still called through the DB thread), to compare the "
                "gate + SDK overhead on tools/call",
            )
        if "ours" in wanted and args.with_no_audit:
            self.start_server(
                "ours",
                "ours[no-audit]",
                env_extra={"AUDIT_MCP_REQUESTS": "0"},
                note="AUDIT_MCP_REQUESTS=0: the same /mcp without the per-request audit event "
                "(shows what the audit write costs; not a deployable configuration)",
            )
        for variant in args.variant:
            name, _, assignments = variant.partition(":")
            env = dict(a.split("=", 1) for a in assignments.split(",") if "=" in a)
            self.start_server("ours", f"ours[{name}]", env_extra=env, note=f"env {env}")
        for source in args.source:
            name, _, directory = source.partition("=")
            self.start_server(
                "ours",
                f"ours[{name}]",
                root=Path(directory).resolve(),
                note=f"the same /mcp served from the source tree {directory}",
            )
        for server in self.servers:
            if server.note:
                self.notes.append(f"{server.label}: {server.note}")

        self.probes = {}
        for server in self.servers:
            for method in methods:
                if method == "tools/list" and server.label == "ours[stub-engine]":
                    continue
                self.probes[(server.label, method)] = self.probe(server, method)

        results: list[RunResult] = []
        rounds = max(1, args.repeat)
        total = rounds * sum(
            1 for m in methods for _ in concurrencies for s in self.servers if _runs(s, m)
        )
        if rounds > 1:
            self.notes.append(f"each figure is the run with the median req/s of {rounds} rounds")
        done = 0
        for method in methods:
            for concurrency in concurrencies:
                runs: dict[str, list[RunResult]] = {}
                for server in [s for _ in range(rounds) for s in self.servers]:
                    # Interleaved: bare and ours side by side, round after round.
                    if not _runs(server, method):
                        continue
                    done += 1
                    if args.warmup > 0:
                        self.load(server, method, concurrency, args.warmup, check=False)
                    cpu_before = cpu_seconds(server.process.pid)
                    result = self.load(server, method, concurrency, args.duration, check=True)
                    cpu_after = cpu_seconds(server.process.pid)
                    if cpu_before is not None and cpu_after is not None and result.requests:
                        # CPU per request is steadier than req/s on a machine that is not idle.
                        result.extra["cpu_ms_per_req"] = (
                            (cpu_after - cpu_before) * 1000 / result.requests
                        )
                        result.extra["cpu_util"] = (cpu_after - cpu_before) / result.duration_s
                    result.extra["rss_mib"] = rss_mib(server.process.pid)
                    runs.setdefault(server.label, []).append(result)
                    print(
                        f"  [{done}/{total}] {server.label:<18} {method:<10} c={concurrency:<2} "
                        f"{result.rps:8.0f} req/s  p50 {result.p50_ms:6.2f} ms  "
                        f"p99 {result.p99_ms:6.2f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
                    time.sleep(0.5)
                for label_runs in runs.values():
                    ordered = sorted(label_runs, key=lambda r: r.rps)
                    median = ordered[len(ordered) // 2]
                    median.extra["rounds_rps"] = [round(r.rps) for r in label_runs]
                    results.append(median)

        if args.profile:
            self.profile(Path(args.profile), methods, concurrencies)
        return results

    def profile(self, out_dir: Path, methods: list[str], concurrencies: list[int]) -> None:
        """Extra, unmeasured passes with py-spy attached (collapsed stacks + flame graph)."""
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(py_spy).exists() and not shutil.which("py-spy"):
            self.notes.append("--profile: py-spy not found (pip install py-spy); skipped")
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        duration = max(5, int(self.args.duration))
        for server, method, concurrency in itertools.product(self.servers, methods, concurrencies):
            if not _runs(server, method):
                continue
            label = server.label.replace("[", "-").replace("]", "")
            stem = f"{label}_{method.replace('/', '_')}_c{concurrency}"
            for fmt, suffix in (("raw", "txt"), ("flamegraph", "svg")):
                spy = subprocess.Popen(
                    self.load_pin
                    + [
                        py_spy,
                        "record",
                        "--pid",
                        str(server.process.pid),
                        "--duration",
                        str(duration),
                        "--rate",
                        "250",
                        "--nonblocking",
                        "--gil",  # only the thread holding the GIL: where the CPU goes
                        "--format",
                        fmt,
                        "--output",
                        str(out_dir / f"{stem}.{suffix}"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    time.sleep(0.5)
                    self.load(server, method, concurrency, duration - 1, check=False)
                finally:
                    spy.wait(timeout=duration + 30)
        self.notes.append(f"py-spy profiles (unmeasured passes) in {out_dir}")

    def _create_postgres_database(self, server_url: str) -> str:
        """A throwaway database on that PostgreSQL server; dropped again by close()."""
        import psycopg

        self.postgres_database = f"hyperbook_bench_{os.getpid()}"
        with psycopg.connect(server_url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{self.postgres_database}"')
        base, _, _ = server_url.rpartition("/")
        return f"{base}/{self.postgres_database}"

    def close(self) -> None:
        for server in self.servers:
            with contextlib.suppress(Exception):
                server.stop()
        if self.postgres_database and not self.args.keep:
            import psycopg

            with psycopg.connect(self.args.postgres, autocommit=True) as connection:
                connection.execute(
                    f'DROP DATABASE IF EXISTS "{self.postgres_database}" WITH (FORCE)'
                )
        if self.args.keep:
            print(f"kept {self.tmp} (database, server logs)", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _runs(server: ServerProcess, method: str) -> bool:
    return not (server.label == "ours[stub-engine]" and method != "tools/call")


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _errors_cell(r: RunResult) -> str:
    parts = [str(r.non2xx + r.socket_errors)]
    if r.rpc_errors or r.tool_errors:
        share = 100 * (r.rpc_errors + r.tool_errors) / max(1, r.checked)
        kinds = []
        if r.tool_errors:
            kinds.append(f"{r.tool_errors} isError")
        if r.rpc_errors:
            kinds.append(f"{r.rpc_errors} rpc")
        parts.append(f"({', '.join(kinds)}: {share:.0f}%)")
    return " ".join(parts)


def report(bench: Bench, results: list[RunResult]) -> dict:
    args = bench.args
    lines = []
    loadgen = "wrk -t1 (keep-alive)" if bench.loadgen == "wrk" else "Python asyncio (FALLBACK)"
    pin = "servers on core 0, load on core 1" if bench.server_pin else "not pinned"
    lines.append(
        f"MCP benchmark: {loadgen}; {pin}; {args.duration:g} s per run; "
        f"MCP-Protocol-Version {args.protocol_version}; server log level {args.log_level}"
    )
    lines.append(_versions())
    for note in bench.notes:
        lines.append(f"  note: {note}")
    for (label, method), outcome in bench.probes.items():
        lines.append(f"  probe {label} {method}: {outcome}")
    lines.append("")
    header = (
        f"{'server':<18} {'method':<10} {'c':>2} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'max ms':>7} {'CPU ms/req':>10} {'RSS MiB':>7}  errors (non-2xx)"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for r in results:
        rss = r.extra.get("rss_mib")
        cpu = r.extra.get("cpu_ms_per_req")
        lines.append(
            f"{r.server:<18} {r.method:<10} {r.concurrency:>2} {r.rps:>8.0f} {r.p50_ms:>7.2f} "
            f"{r.p99_ms:>7.2f} {r.max_ms:>7.1f} {'-' if cpu is None else f'{cpu:.3f}':>10} "
            f"{'-' if rss is None else round(rss):>7}  {_errors_cell(r)}"
        )

    by_key = {(r.server, r.method, r.concurrency): r for r in results}
    ratios = []
    lines.append("")
    lines.append("ratios ours / bare (req/s: higher is better; latency: lower is better)")
    rheader = (
        f"{'server':<18} {'method':<10} {'c':>2} {'req/s':>7} {'p50':>7} {'p99':>7} {'CPU/req':>7}"
    )
    lines.append(rheader)
    lines.append("-" * len(rheader))
    for r in results:
        if r.server == "bare":
            continue
        base = by_key.get(("bare", r.method, r.concurrency))
        if base is None or not base.rps:
            continue
        ratio = {
            "server": r.server,
            "method": r.method,
            "concurrency": r.concurrency,
            "rps": r.rps / base.rps,
            "p50": r.p50_ms / base.p50_ms if base.p50_ms else None,
            "p99": r.p99_ms / base.p99_ms if base.p99_ms else None,
            "cpu_per_req": (
                r.extra["cpu_ms_per_req"] / base.extra["cpu_ms_per_req"]
                if r.extra.get("cpu_ms_per_req") and base.extra.get("cpu_ms_per_req")
                else None
            ),
        }
        each = [
            ours / bare
            for ours, bare in zip(
                r.extra.get("rounds_rps", []), base.extra.get("rounds_rps", []), strict=False
            )
            if bare
        ]
        ratio["rounds_rps"] = each
        ratios.append(ratio)
        lines.append(
            f"{r.server:<18} {r.method:<10} {r.concurrency:>2} {ratio['rps']:>6.2f}x "
            f"{_fmt_ratio(ratio['p50'])} {_fmt_ratio(ratio['p99'])} "
            f"{_fmt_ratio(ratio['cpu_per_req'])}"
            + (
                f"   req/s ratio per round: {' '.join(f'{x:.2f}' for x in each)}"
                f" (mean {statistics.mean(each):.2f}, {min(each):.2f}-{max(each):.2f})"
                if len(each) > 1
                else ""
            )
        )

    targets = {}
    ours8 = by_key.get(("ours", "tools/list", 8))
    bare8 = by_key.get(("bare", "tools/list", 8))
    if ours8 and bare8:
        ratio = ours8.rps / bare8.rps
        targets = {
            "tools_list_c8_rps_ratio": ratio,
            "tools_list_c8_rps_ratio_met": ratio >= TARGET_LIST_RATIO,
            "tools_list_c8_p99_ms": ours8.p99_ms,
            "tools_list_c8_p99_met": ours8.p99_ms < TARGET_P99_MS,
        }
        lines.append("")
        lines.append(
            f"target tools/list c=8 throughput >= {TARGET_LIST_RATIO}x bare: {ratio:.2f}x "
            f"-> {'MET' if targets['tools_list_c8_rps_ratio_met'] else 'NOT MET'}"
        )
        lines.append(
            f"target tools/list c=8 p99 < {TARGET_P99_MS:g} ms (ours): {ours8.p99_ms:.2f} ms "
            f"-> {'MET' if targets['tools_list_c8_p99_met'] else 'NOT MET'}"
        )
        if bench.loadgen != "wrk":
            lines.append(
                "  (Python load generator: it can cap the bare server's rate, which flatters the "
                "ratio; judge the targets with wrk)"
            )
    audit_costs = _audit_costs(by_key, results)
    if audit_costs:
        lines.append("")
        lines.append(
            "what the audit event costs: 1 - ours / ours[no-audit] in req/s"
            + (" (median of the rounds' pairs)" if audit_costs[0]["rounds"] else "")
        )
        for cost in audit_costs:
            each = ", ".join(f"{x:.1%}" for x in cost["rounds"])
            lines.append(
                f"  {cost['server']:<18} {cost['method']:<10} c={cost['concurrency']}: "
                f"{cost['share']:6.1%}" + (f"   (rounds in order: {each})" if each else "")
            )
        for cost in audit_costs:
            limit = TARGET_AUDIT_COST.get(cost["method"])
            if cost["server"] != "ours" or cost["concurrency"] != 8 or limit is None:
                continue
            key = f"audit_cost_{cost['method'].replace('/', '_')}_c8"
            targets[key], targets[f"{key}_met"] = cost["share"], cost["share"] <= limit
            lines.append(
                f"target audit cost {cost['method']} c=8 <= {limit:.0%} of throughput: "
                f"{cost['share']:.1%} -> {'MET' if targets[f'{key}_met'] else 'NOT MET'}"
            )
    print("\n".join(lines))
    return {
        "results": [asdict(r) for r in results],
        "ratios": ratios,
        "audit_costs": audit_costs,
        "targets": targets,
        "notes": bench.notes,
        "probes": {f"{k[0]} {k[1]}": v for k, v in bench.probes.items()},
        "loadgen": bench.loadgen,
        "duration_s": args.duration,
        "protocol_version": args.protocol_version,
    }


def _audit_costs(by_key: dict, results: list[RunResult]) -> list[dict]:
    """1 - ours / ours[no-audit] in req/s; over several rounds, the median of each round's pair.

    The two runs of a round follow each other, so a machine that slows down for a while (a busy
    neighbour) slows both; the medians of the two servers' rounds may come from different ones."""
    costs = []
    for r in results:
        if not r.server.startswith("ours") or r.server in ("ours[no-audit]", "ours[stub-engine]"):
            continue
        without = by_key.get(("ours[no-audit]", r.method, r.concurrency))
        if without is None or not without.rps:
            continue
        ours_rounds = r.extra.get("rounds_rps", [])
        without_rounds = without.extra.get("rounds_rps", [])
        if len(ours_rounds) == len(without_rounds) > 1 and all(without_rounds):
            shares = [1 - a / b for a, b in zip(ours_rounds, without_rounds, strict=True)]
            share = statistics.median(shares)
            rounds = [round(x, 3) for x in shares]
        else:
            share, rounds = 1 - r.rps / without.rps, []
        costs.append(
            {
                "server": r.server,
                "method": r.method,
                "concurrency": r.concurrency,
                "share": share,
                "rounds": rounds,
            }
        )
    return costs


def _fmt_ratio(value: float | None) -> str:
    return f"{value:>6.2f}x" if value is not None else f"{'-':>7}"


def _versions() -> str:
    from importlib import metadata

    parts = [f"Python {sys.version.split()[0]}"]
    for dist in ("mcp", "uvicorn", "Django", "starlette", "h11"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            parts.append(f"{dist} {metadata.version(dist)}")
    for dist in ("uvloop", "httptools"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"no {dist}")
    if shutil.which("wrk"):
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
        first = (out.stdout or out.stderr).splitlines()[:1]
        if first:
            parts.append(first[0].split(" Copyright")[0].strip())
    return "  " + "; ".join(parts)


# --------------------------------------------------------------------------------------------
# Internal modes: database preparation (in Django) and the fallback load generator
# --------------------------------------------------------------------------------------------


def _prepare_database() -> None:
    """In the bench's Django environment: one stakeholder and delegation; prints the token."""
    url = os.environ.get("DATABASE_URL", "")
    throwaway = (url.startswith("sqlite:///") and TMP_PREFIX in url) or url.rpartition("/")[
        2
    ].startswith("hyperbook_bench_")
    if not throwaway:
        # Never issue a delegation into a real database by running this mode by hand.
        raise SystemExit("--_prepare only runs against the benchmark's throwaway database")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from kb.models import Stakeholder
    from registry.services import delegation_issue

    call_command("load_kb_demo", verbosity=0)
    stakeholder = Stakeholder.objects.get(stakeholder_id="KB-P-001")
    _, token = delegation_issue(
        stakeholder=stakeholder,
        agent_name="mcp bench",
        expires_at=timezone.now() + timedelta(days=1),
    )
    prepared = {"token": token, "stakeholder": stakeholder.stakeholder_id}
    print(RESULT_PREFIX + json.dumps(prepared), flush=True)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {}
    for line in header_lines:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    else:
        body = await reader.read()
        return status, body, True
    return status, body, headers.get("connection", "").lower() == "close"


async def _loadgen(url: str, concurrency: int, duration: float) -> dict:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port, path = parts.hostname, parts.port or 80, parts.path or "/"
    headers = mcp_headers(
        os.environ.get("MCP_BENCH_TOKEN", ""),
        os.environ.get("MCP_BENCH_PV", PROTOCOL_VERSION),
        os.environ.get("MCP_BENCH_METHOD", ""),
    )
    check = os.environ.get("MCP_BENCH_CHECK") == "1"
    requests = [
        (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            + f"Content-Length: {len(body.encode())}\r\n\r\n"
        ).encode("latin-1")
        + body.encode()
        for body in os.environ["MCP_BENCH_BODY"].split("\n")
    ]
    turn = itertools.cycle(requests)
    latencies: list[float] = []
    counts = {"non2xx": 0, "errors": 0, "timeouts": 0, "rpc": 0, "tool": 0, "checked": 0}
    started = time.perf_counter()
    deadline = started + duration

    async def client():
        reader = writer = None
        while time.perf_counter() < deadline:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, port)
                t0 = time.perf_counter()
                writer.write(next(turn))
                status, payload, close = await asyncio.wait_for(_read_response(reader), 5)
                latencies.append(time.perf_counter() - t0)
                if not 200 <= status < 300:
                    counts["non2xx"] += 1
                if check:
                    counts["checked"] += 1
                    if b'"isError":true' in payload:
                        counts["tool"] += 1
                    elif b'"error":{' in payload:
                        counts["rpc"] += 1
                if close:
                    writer.close()
                    reader = writer = None
            except TimeoutError:
                counts["timeouts"] += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
            except (OSError, asyncio.IncompleteReadError, ValueError):
                counts["errors"] += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
                await asyncio.sleep(0.01)
        if writer is not None:
            writer.close()

    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()

    def pct(p: float) -> int:
        if not latencies:
            return 0
        index = min(len(latencies) - 1, max(0, round(p / 100 * len(latencies)) - 1))
        return int(latencies[index] * 1e6)

    return {
        "requests": len(latencies),
        "duration_us": int(elapsed * 1e6),
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "max_us": int(latencies[-1] * 1e6) if latencies else 0,
        "mean_us": (sum(latencies) / len(latencies) * 1e6) if latencies else 0,
        "non2xx": counts["non2xx"],
        "connect_errors": counts["errors"],
        "read_errors": 0,
        "write_errors": 0,
        "timeouts": counts["timeouts"],
        "rpc_errors": counts["rpc"],
        "tool_errors": counts["tool"],
        "checked": counts["checked"],
    }


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (5-10)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured s before each run")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every run; the median run is reported"
    )
    parser.add_argument("--concurrency", default="1,8", help="comma-separated (default 1,8)")
    parser.add_argument("--methods", default="tools/list,tools/call")
    parser.add_argument("--servers", default="bare,ours")
    parser.add_argument(
        "--prompts",
        choices=("varied", "fixed"),
        default="varied",
        help="tools/call: cycle through selectai_bench's varied prompts (default) or ask one",
    )
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--protocol-version", default=PROTOCOL_VERSION)
    parser.add_argument(
        "--log-level", default="INFO", help="our server's LOG_LEVEL (default INFO, as deployed)"
    )
    parser.add_argument(
        "--stub-engine",
        choices=("yes", "no"),
        default="no",
        help="add 'ours[stub-engine]' tools/call rows: the engine replaced by a fixed answer",
    )
    parser.add_argument(
        "--with-no-audit",
        action="store_true",
        help="add 'ours[no-audit]' rows (AUDIT_MCP_REQUESTS=0) to show the audit write's cost",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
        help="add an 'ours[NAME]' server with these environment variables (repeatable); its audit "
        "cost is reported too when --with-no-audit is given",
    )
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="add an 'ours[NAME]' server run from another copy of the project's source (e.g. "
        "`git archive` of an earlier commit unpacked in DIR), for before/after side by side",
    )
    parser.add_argument("--profile", metavar="DIR", help="after the runs, py-spy each server")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (db, logs)")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="use a throwaway database on this PostgreSQL server instead of SQLite "
        "(e.g. postgres://postgres@127.0.0.1:5432/postgres; needs CREATEDB)",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not use taskset")
    # internal modes
    parser.add_argument("--_prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--_loadgen", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._prepare:
        _prepare_database()
        return 0
    if args._loadgen:
        concurrency = int(args.concurrency)
        result = asyncio.run(_loadgen(args.url, concurrency, args.duration))
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0

    if not 1 <= args.duration <= 60:
        parser.error("--duration must be between 1 and 60 seconds")
    if not 5 <= args.duration <= 10:
        print(f"note: --duration {args.duration:g} is outside the usual 5-10 s", file=sys.stderr)

    # SIGTERM/SIGHUP end the run through the finally below, which stops the servers.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))

    bench = Bench(args)
    try:
        results = bench.run()
        summary = report(bench, results)
    finally:
        bench.close()
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
