"""A real hyperbook server process on loopback, serving the test database."""

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for_servers() -> str:
    """The URL of the database this test run uses, for a server in another process."""
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{settings_dict['NAME']}"


@contextmanager
def live_server(
    log_path: Path, extra_env: dict | None = None, workers: int = 1, port: int | None = None
):
    """Start uvicorn on a free loopback port (or `port`, when a peer must know it first); yield
    its base URL; stop it at the end."""
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        # The server's discovery console talks to the server's own /mcp unless told otherwise.
        "KB_MCP_BASE_URL": base_url,
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
        "DATABASE_URL": database_url_for_servers(),
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
        "FORWARDED_ALLOW_IPS": "",  # as bin/serve runs it: no proxy is trusted unless named
        **(extra_env or {}),
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "hyperbook.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=2).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def process_group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies left out: they hold nothing)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp …; comm may hold spaces and brackets, so split after it.
        state, _ppid, group = text.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            members.append(int(text.split(" ", 1)[0]))
    return sorted(members)


def port_is_free(port: int) -> bool:
    """Nothing listens on the loopback port: a connection is refused and a new listener binds."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        pass
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True
