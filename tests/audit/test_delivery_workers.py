"""/mcp requests -> audit events -> a real Celery worker on real Redis -> a flaky Memory API."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from audit.delivery import deliveries_queue_new
from audit.models import AuditEvent, Delivery
from audit.selectors import with_delivery_state
from core.tokens import token_fingerprint
from kb.models import Stakeholder
from registry.models import TokenDelegation
from registry.services import delegation_issue, delegation_register
from tests.audit.conftest import BROKER
from tests.audit.memory_sink import MemorySink
from tests.live import ROOT, database_url_for_servers, live_server
from tests.mcpserver.conftest import MCP_HEADERS, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

SERVICE_TOKEN = "svc-credential-for-tests-0123456789"
CANARY = "CANARYaudit4Hq8Zm2Xw6Pv9Lt3Rb7Nc5Kd1"


@pytest.fixture(scope="module")
def tokens(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        from django.core.management import call_command

        call_command("load_kb_demo", verbosity=0)
        planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
        expires = timezone.now() + timedelta(days=1)
        _, token = delegation_issue(stakeholder=planner, agent_name="audit", expires_at=expires)
        # Other modules use this fixture too, against the same committed database.
        if not TokenDelegation.objects.filter(fingerprint=token_fingerprint(CANARY)).exists():
            delegation_register(
                raw_token=CANARY, stakeholder=planner, agent_name="canary", expires_at=expires
            )
    return {"planner": token, "canary": CANARY}


def environment(sink: MemorySink) -> dict:
    return {
        "EGS2_MEMORY_API_URL": sink.url,
        "EGS2_MEMORY_API_TOKEN": SERVICE_TOKEN,
        "EGS2_MEMORY_API_TIMEOUT_SECONDS": "1",
        "EGS2_MEMORY_API_BATCH_SIZE": "7",
        "AUDIT_DELIVERY_SWEEP_SECONDS": "1",
        "AUDIT_DELIVERY_MAX_BACKOFF_SECONDS": "1",
        "AUDIT_DELIVERY_LEASE_SECONDS": "4",
        "CELERY_BROKER_URL": BROKER,
        "REDIS_URL": "",
        "MCP_RATE_LIMIT": "10000/minute",
        "MCP_AUTH_FAILURE_LIMIT": "10000/minute",
    }


def start_worker(env: dict, log_path, schedule_path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "hyperbook",
        "worker",
        "--beat",
        "--schedule",
        str(schedule_path),
        "--loglevel",
        "INFO",
        "--concurrency",
        "1",
    ]
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
        "DATABASE_URL": database_url_for_servers(),
        **env,
    }
    with open(log_path, "ab") as log:
        # Its own process group: the worker's pool children can be signalled (and killed) with it.
        return subprocess.Popen(
            command, cwd=ROOT, env=full_env, stdout=log, stderr=log, start_new_session=True
        )


def stop(process: subprocess.Popen, sig=signal.SIGTERM) -> None:
    """Signal the worker's whole process group; whatever is left after 20 s is killed."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=5)


def wait_until(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def pending_count(django_db_blocker) -> int:
    with django_db_blocker.unblock():
        connection.close()  # see the other processes' commits with a fresh connection
        return with_delivery_state(AuditEvent.objects.all(), Delivery.State.PENDING).count()


def last_sequence(django_db_blocker) -> int:
    """Where this test's events begin. Events that earlier tests left pending (they ran with no
    Memory API) are set aside, so the faults scripted here meet this test's events only."""
    with django_db_blocker.unblock():
        connection.close()
        deliveries_queue_new(limit=100_000)
        Delivery.objects.filter(state=Delivery.State.PENDING).update(
            state=Delivery.State.REJECTED, last_error="set aside by the test"
        )
        return (
            Delivery.objects.order_by("-sequence").values_list("sequence", flat=True).first() or 0
        )


def send_requests(url: str, tokens: dict, n: int) -> list[str]:
    request_ids = []
    with httpx.Client(timeout=30) as client:
        for index in range(n):
            kind = index % 4
            headers = dict(MCP_HEADERS)
            if kind == 0:
                headers["Authorization"] = f"Bearer {tokens['planner']}"
                body = rpc("tools/list")
            elif kind == 1:
                headers["Authorization"] = f"Bearer {tokens['canary']}"
                body = call("담당 고객 목록", 3)
            elif kind == 2:
                headers["Authorization"] = "Bearer CANARYforged0000000000000000000000"
                body = rpc("tools/list")
            else:
                body = rpc("tools/list")  # no token
            response = client.post(f"{url}/mcp", json=body, headers=headers)
            request_ids.append(response.headers["x-request-id"])
    return request_ids


def test_every_request_reaches_the_memory_api_once_in_effect_despite_faults(
    tokens, broker, tmp_path, django_db_blocker
):
    before = last_sequence(django_db_blocker)
    with MemorySink(SERVICE_TOKEN, slow_seconds=2) as sink:
        sink.faults = ["down", "500", "slow", "429", "garbage", "reject_first", None, "500"]
        env = environment(sink)
        with live_server(tmp_path / "server.log", env) as url:
            request_ids = send_requests(url, tokens, 24)
            # Before any worker runs, look at what waits in the broker: no secrets there.
            queued = b"".join(broker.lrange("celery", 0, -1))
            assert CANARY.encode() not in queued
            assert tokens["planner"].encode() not in queued
            worker = start_worker(env, tmp_path / "worker.log", tmp_path / "beat")
            try:
                wait_until(lambda: pending_count(django_db_blocker) == 0, 90, "delivery")
            finally:
                stop(worker)
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        server_log = (tmp_path / "server.log").read_text(errors="replace")

    with django_db_blocker.unblock():
        connection.close()
        request_events = {
            e.request_id: e for e in AuditEvent.objects.filter(action__startswith="mcp.")
        }
        deliveries = {
            str(d.event_id): d.state for d in Delivery.objects.filter(sequence__gt=before)
        }
        stored = "\n".join(repr(v) for v in AuditEvent.objects.values_list())
    # One event per request, found by its request id.
    assert set(request_ids) <= set(request_events)
    rejected = {event_id for event_id, state in deliveries.items() if state == "rejected"}
    delivered = {event_id for event_id, state in deliveries.items() if state == "delivered"}
    assert rejected == sink.rejected and len(rejected) == 1
    assert delivered | rejected == set(deliveries)
    # The receiver holds exactly the delivered events: none missing, none under two ids.
    # (Events left pending by earlier tests in the same database may arrive too.)
    events = sink.of_kind("audit_event")  # the worker delivers signed checkpoints too
    received_now = {i for i, memory in events.items() if memory["sequence"] > before}
    assert received_now == delivered
    sequences = Counter(memory["sequence"] for memory in events.values())
    assert max(sequences.values()) == 1
    for request_id in request_ids:
        event = request_events[request_id]
        assert str(event.id) in delivered | rejected
    # No bearer token or Authorization header anywhere it was written or sent.
    bodies = b"".join(sink.raw_bodies)
    for secret in (CANARY, tokens["planner"], "CANARYforged"):
        assert secret.encode() not in bodies
        assert secret not in stored
        assert secret not in worker_log and secret not in server_log
    assert b"authorization" not in bodies.lower()


def test_a_worker_killed_mid_batch_loses_nothing(tokens, broker, tmp_path, django_db_blocker):
    before = last_sequence(django_db_blocker)
    with MemorySink(SERVICE_TOKEN, slow_seconds=3) as sink:
        sink.faults = ["slow_store"]
        env = environment(sink)
        with live_server(tmp_path / "server.log", env) as url:
            send_requests(url, tokens, 12)
            worker = start_worker(env, tmp_path / "worker.log", tmp_path / "beat")
            try:
                wait_until(lambda: sink.requests >= 1, 60, "the first delivery attempt")
                time.sleep(0.5)
                stop(worker, signal.SIGKILL)  # mid-batch: the receiver is still answering
            finally:
                stop(worker)
            assert pending_count(django_db_blocker) > 0
            worker = start_worker(env, tmp_path / "worker2.log", tmp_path / "beat2")
            try:
                wait_until(lambda: pending_count(django_db_blocker) == 0, 90, "redelivery")
            finally:
                stop(worker)

    with django_db_blocker.unblock():
        connection.close()
        mine = Delivery.objects.filter(sequence__gt=before)
        assert set(mine.values_list("state", flat=True)) == {"delivered"}
        event_ids = {str(i) for i in mine.values_list("event_id", flat=True)}
    events = sink.of_kind("audit_event")
    received_now = {i for i, memory in events.items() if memory["sequence"] > before}
    assert received_now == event_ids
    assert len({m["sequence"] for m in events.values()}) == len(events)
