"""The web server as bin/serve runs it (gunicorn, config/gunicorn.conf.py) against slow and
many clients: a request dripped a byte at a time is cut off, a flood of connections is refused
with 503, and both leave the server answering."""

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.live import ROOT, database_url_for_servers, free_port

pytestmark = [pytest.mark.db, pytest.mark.slow]

READ_TIMEOUT = 2  # seconds to read a request, for this test
CONNECTIONS = 20  # per worker


@pytest.fixture(scope="module")
def web(django_db_setup, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("web") / "gunicorn.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
        "DATABASE_URL": database_url_for_servers(),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_WORKERS": "1",
        "WEB_WORKER_CONNECTIONS": str(CONNECTIONS),
        "WEB_REQUEST_READ_TIMEOUT_SECONDS": str(READ_TIMEOUT),
        "HYPERBOOK_VAR_DIR": str(log.parent),
        "PROMETHEUS_MULTIPROC_DIR": "",
    }
    command = [sys.executable, "-m", "gunicorn", "hyperbook.asgi:application", "-c",
               "config/gunicorn.conf.py"]  # fmt: skip
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while not healthy(url):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.3)
        yield port, url
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=60)


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def half_sent(port: int) -> socket.socket:
    """A connection that has sent the start of a request, and no more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, TimeoutError):
        return isinstance(sys.exc_info()[1], ConnectionResetError)


def test_a_request_dripped_a_byte_at_a_time_is_cut_off(web):
    port, url = web
    sock = half_sent(port)
    started = time.monotonic()
    cut_off = None
    with sock:
        for _ in range(int(READ_TIMEOUT * 4) + 8):  # at most about 2× the deadline, in all
            try:
                sock.sendall(b"X")  # one byte of a header name every quarter of a second
            except OSError:
                cut_off = time.monotonic() - started
                break
            sock.settimeout(0.25)
            try:
                if sock.recv(1024) == b"":
                    cut_off = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:
                cut_off = time.monotonic() - started
                break
    assert cut_off is not None, "the dripping client is still connected"
    assert READ_TIMEOUT - 0.5 <= cut_off <= READ_TIMEOUT + 2, cut_off
    assert healthy(url)


def test_a_flood_of_connections_is_refused_with_503_then_served_again(web):
    port, url = web
    flood = [half_sent(port) for _ in range(CONNECTIONS)]
    try:
        time.sleep(0.3)  # the worker has accepted them all
        refused = httpx.get(f"{url}/healthz", timeout=5)
        assert refused.status_code == 503
        assert refused.text == "Service Unavailable"  # uvicorn's, not our /healthz's JSON
        time.sleep(READ_TIMEOUT + 1)  # the half-sent requests are cut off meanwhile
        assert all(closed_by_server(sock) for sock in flood)
    finally:
        for sock in flood:
            sock.close()
    assert healthy(url)
