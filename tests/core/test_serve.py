"""`make run` as a new user runs it: its set-up steps, then bin/serve under supervisor, on a port
other than 8000, with a loopback Memory API. Then the things that used to take the demo down:
a killed worker, an empty broker message, a killed web master; and finally Ctrl-C, after which
nothing holds the port.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.audit.memory_sink import MemorySink
from tests.live import ROOT, free_port, port_is_free, process_group
from tests.mcpserver.conftest import MCP_HEADERS, call
from tests.registry.fault_server import RecordingServer, serving

pytestmark = pytest.mark.slow

SINK_TOKEN = "svc-credential-for-serve-tests-0123456789"
SET_UP = [  # make run's steps before bin/serve
    ["migrate", "--noinput", "-v0"],
    ["collectstatic", "--noinput", "-v0"],
    ["import_mcp_servers", "config/mcp_servers.json"],
    ["load_kb_demo"],
    ["ensure_admin"],
    ["issue_demo_delegations"],
]


def loose_umask():
    os.umask(0o022)  # what a new user's shell usually has


class Demo:
    def __init__(self, var: Path, env: dict, port: int):
        self.var, self.env, self.port = var, env, port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None
        self.killed_groups: list[int] = []  # process groups whose leader a test killed

    def manage(self, *args, check=True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=check,
            preexec_fn=loose_umask,  # noqa: PLW1509
        )

    def supervisorctl(self, *args) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "supervisor.supervisorctl", "-c", "config/supervisord.conf"]
            + list(args),
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return result.stdout.strip()

    def pid(self, program: str) -> int:
        value = self.supervisorctl("pid", program)
        return int(value) if value.isdigit() else 0

    def token(self, stakeholder="KB-P-001") -> str:
        return json.loads((self.var / "vpd_token_presets.json").read_text())[stakeholder]

    def ask(self) -> httpx.Response:
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {self.token()}"}
        return httpx.post(
            f"{self.url}/mcp", json=call("담당 고객 목록", 5), headers=headers, timeout=30
        )

    def ask_status(self) -> int | str:
        """The status of one question, or the name of the connection error."""
        try:
            return self.ask().status_code
        except httpx.HTTPError as exc:
            return type(exc).__name__

    def health(self) -> dict:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return {}


@contextmanager
def asking_all_along(demo: Demo):
    """Questions one after another from a second thread while the body runs; yields the tally
    of their statuses."""
    tally: Counter = Counter()
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            tally[demo.ask_status()] += 1

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    try:
        yield tally
    finally:
        stop.set()
        thread.join(timeout=60)


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def bystander_on_8000():
    """A recorder on port 8000 when that port is free (None when it is not): anything the demo
    sends there is a bug, since it serves elsewhere."""
    context = serving(RecordingServer(), port=8000)
    try:
        recorder = context.__enter__()
    except OSError:
        yield None
        return
    try:
        yield recorder
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    var = tmp_path_factory.mktemp("demo") / "var"
    port = free_port()
    with MemorySink(SINK_TOKEN) as sink:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "hyperbook.settings.local",
            "HYPERBOOK_VAR_DIR": str(var),
            "HYPERBOOK_PYTHON": sys.executable,
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "DATABASE_URL": "",
            "REDIS_URL": "",
            "CELERY_BROKER_URL": "",
            "KB_MCP_BASE_URL": "",
            "MCP_ALLOWED_ORIGINS": "",
            "MCP_RESOURCE_URL": "",
            "EGS2_MEMORY_API_URL": sink.url,
            "EGS2_MEMORY_API_TOKEN": SINK_TOKEN,
            "AUDIT_DELIVERY_SWEEP_SECONDS": "1",
            "AUDIT_DELIVERY_MAX_BACKOFF_SECONDS": "2",
            "CELERY_LOG_LEVEL": "INFO",
        }
        demo = Demo(var, env, port)
        for step in SET_UP:
            demo.manage(*step)
        log = var.parent / "serve.log"
        with open(log, "wb") as output:
            demo.process = subprocess.Popen(
                [str(ROOT / "bin" / "serve")],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=loose_umask,  # noqa: PLW1509
            )
        demo.log, demo.sink = log, sink
        try:
            wait_until(lambda: demo.health().get("status") == "ok", 120, "the demo to be healthy")
            yield demo
        finally:
            if demo.process.poll() is None:
                # SIGTERM: supervisor stops its programs (each in a process group of its own,
                # which a SIGKILL of supervisor alone would leave running).
                os.killpg(demo.process.pid, signal.SIGTERM)
                try:
                    demo.process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(demo.process.pid, signal.SIGKILL)
                    demo.process.wait(timeout=10)
            for group in demo.killed_groups:  # orphans of a failed test must not outlive it
                if process_group(group):
                    os.killpg(group, signal.SIGKILL)


def test_the_demo_answers_on_its_own_port_and_never_on_8000(demo):
    with bystander_on_8000() as bystander:
        response = demo.ask()
        result = demo.manage("kb_ask", "--as", "KB-P-001", "담당 고객 목록")
        discovered = demo.manage("kb_ask", "--as", "KB-M-001", "--discover")
    assert response.status_code == 200, response.text
    assert "request id" in result.stdout, result.stderr
    assert f"127.0.0.1:{demo.port}/mcp" in discovered.stdout
    if bystander is not None:
        assert bystander.requests == []


def test_every_url_the_demo_derives_names_its_own_port(demo):
    code = (
        "from django.conf import settings;"
        "print(settings.KB_MCP_BASE_URL, *settings.MCP_ALLOWED_ORIGINS)"
    )
    urls = demo.manage("shell", "-v0", "-c", code).stdout.split()
    assert urls and all(url.endswith(f":{demo.port}") for url in urls)
    assert not any(":8000" in url for url in urls)


def test_a_killed_worker_is_restarted_and_the_web_server_keeps_answering(demo):
    worker = demo.pid("worker")
    assert worker
    os.kill(worker, signal.SIGKILL)
    answered = [demo.ask().status_code for _ in range(5)]  # while it is down
    assert answered == [200] * 5
    restarted = wait_until(
        lambda: (pid := demo.pid("worker")) not in (0, worker) and pid, 60, "a new worker"
    )
    assert restarted != worker
    # The events recorded while it was down are delivered once it is back.
    wait_until(
        lambda: demo.health().get("audit_backlog", {}).get("pending") == 0,
        90,
        "the backlog to drain",
    )
    assert demo.sink.memories


def test_an_empty_broker_message_is_set_aside_and_nothing_goes_down(demo):
    worker = demo.pid("worker")
    empty = demo.var / "broker" / f"{int(time.monotonic() * 1000)}_{uuid.uuid4()}.celery.msg"
    empty.write_bytes(b"")
    wait_until(lambda: (demo.var / "broker-dead" / empty.name).exists(), 30, "the dead letter")
    before = len(demo.sink.of_kind("audit_event"))
    assert demo.ask().status_code == 200
    wait_until(
        lambda: len(demo.sink.of_kind("audit_event")) > before, 60, "the new event's delivery"
    )
    assert demo.pid("worker") == worker  # the same worker, never restarted
    assert demo.pid("web")


def test_files_at_rest_are_the_service_users_only(demo):
    var = demo.var

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(var) == 0o700
    private = [
        "hyperbook.sqlite3",
        "django_secret_key",
        "token_fingerprint_key",
        "vpd_token_presets.json",
        "admin_password",
        "serving.json",  # where it serves, for kb_ask and the console
        "supervisord.log",
        "celerybeat-schedule.dat",  # beat's shelve: .dat, .dir and .bak
    ]
    for name in private:
        assert mode(var / name) == 0o600, name
    for name in ("hyperbook.sqlite3-wal", "hyperbook.sqlite3-shm"):
        if (var / name).exists():
            assert mode(var / name) == 0o600, name
    for folder in ("broker", "broker-processed", "broker-dead", "broker-control"):
        assert mode(var / folder) == 0o700, folder
    loose = [
        path
        for path in var.rglob("*")
        if not path.is_symlink() and mode(path) & 0o077 and path.exists()
    ]
    assert loose == []


def test_a_killed_web_master_takes_its_workers_along_and_a_new_one_serves(demo):
    master = demo.pid("web")
    assert set(process_group(master)) - {master}  # supervisor's group for web: its workers
    demo.killed_groups.append(master)
    with asking_all_along(demo) as tally:
        os.kill(master, signal.SIGKILL)  # what the OOM killer does to the largest process
        killed_at = time.monotonic()
        wait_until(lambda: process_group(master) == [], 30, "the old workers to exit")
        new_master = wait_until(
            lambda: (pid := demo.pid("web")) not in (0, master) and pid, 30, "a new master"
        )
        left = 30 - (time.monotonic() - killed_at)
        wait_until(lambda: demo.ask_status() == 200, left, "/mcp from the new master")
    assert demo.pid("web") == new_master
    assert set(process_group(new_master)) - {new_master}, "the new master has workers"
    assert tally[200] > 0
    assert not [status for status in tally if isinstance(status, int) and status >= 500], tally


def test_ctrl_c_stops_everything_after_the_workers_warm_shutdown(demo):
    pids = [demo.pid(name) for name in ("web", "worker", "beat")]
    assert all(pids)
    groups = [process_group(pid) for pid in pids]  # the web workers and the Celery pool too
    os.killpg(demo.process.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
    assert demo.process.wait(timeout=120) == 0
    for pid in [pid for group in groups for pid in group]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "Warm shutdown" in demo.log.read_text(errors="replace")
    assert port_is_free(demo.port)
