"""Redis gone while /mcp is busy: answers stay as fast as with it, and no audit event is lost.

The delivery nudge is published off the request path, so a broker that refuses connections
costs a request nothing; the events wait in the database and the sweep delivers them once the
broker is back.
"""

import statistics
import time

import httpx
import pytest
import redis as redis_client
from django.db import connection

from audit.models import AuditEvent, Delivery
from audit.selectors import with_delivery_state
from tests.audit.memory_sink import MemorySink
from tests.audit.test_delivery_workers import (
    SERVICE_TOKEN,
    environment,
    last_sequence,
    start_worker,
    stop,
    tokens,  # noqa: F401  (the module's fixture)
    wait_until,
)
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, call
from tests.mcpserver.test_rate_limits import PrivateRedis

pytestmark = [pytest.mark.db, pytest.mark.slow, pytest.mark.alone]

ASKED = 40  # sequential questions per phase


def sequential_calls(
    client: httpx.Client, url: str, token: str, asked: int = ASKED
) -> tuple[list[float], list[str]]:
    """The seconds each of `asked` questions asked one after another took, and their request ids."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    seconds, request_ids = [], []
    for _ in range(asked):
        started = time.perf_counter()
        response = client.post(f"{url}/mcp", json=call("담당 고객 목록", 3), headers=headers)
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
        request_ids.append(response.headers["x-request-id"])
        time.sleep(0.05)  # spread over a few seconds: the nudge was published once a second
    return seconds, request_ids


def events_pending(request_ids: list[str]) -> int:
    connection.close()  # see the other processes' commits with a fresh connection
    events = AuditEvent.objects.filter(request_id__in=request_ids)
    return with_delivery_state(events, Delivery.State.PENDING).count() + (
        len(request_ids) - events.count()  # an event never written counts as not delivered
    )


def test_tools_call_keeps_its_pace_without_redis_and_the_sweep_delivers_later(
    tokens,  # noqa: F811
    tmp_path,
    django_db_blocker,
):
    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        with django_db_blocker.unblock():
            last_sequence(django_db_blocker)  # earlier tests' pending events set aside
        with MemorySink(SERVICE_TOKEN) as sink:
            env = {**environment(sink), "CELERY_BROKER_URL": redis.url, "REDIS_URL": redis.url}
            with live_server(tmp_path / "server.log", env) as url, httpx.Client(timeout=30) as c:
                sequential_calls(c, url, tokens["planner"])  # warm up
                healthy, _ = sequential_calls(c, url, tokens["planner"])
                redis.stop()  # kill -9: the broker's port now refuses connections
                without_redis, asked_meanwhile = sequential_calls(c, url, tokens["planner"])
                with django_db_blocker.unblock():
                    assert events_pending(asked_meanwhile) == len(asked_meanwhile)
                redis.start()  # the same port again, empty: every nudge sent meanwhile is gone
                broker = redis_client.Redis.from_url(redis.url)
                # The server's nudges come back by themselves once the broker is (after a rest).
                wait_until(
                    lambda: (
                        sequential_calls(c, url, tokens["planner"], asked=3)
                        and broker.llen("celery") > 0
                    ),
                    40,
                    "a nudge in the broker again",
                )
            worker = start_worker(env, tmp_path / "worker.log", tmp_path / "beat")
            try:
                with django_db_blocker.unblock():
                    wait_until(lambda: events_pending(asked_meanwhile) == 0, 60, "the sweep")
            finally:
                stop(worker)
    finally:
        redis.stop()
    # The median, and the mean too: asked one after another, only the request that published
    # the once-a-second nudge paid kombu's 0.6 s of retries, which leaves the median unmoved.
    assert statistics.median(without_redis) <= 2 * statistics.median(healthy)
    assert statistics.mean(without_redis) <= 2 * statistics.mean(healthy), (
        healthy,
        without_redis,
    )
    with django_db_blocker.unblock():
        asked = AuditEvent.objects.filter(request_id__in=asked_meanwhile)
        event_ids = {str(event_id) for event_id in asked.values_list("id", flat=True)}
    assert len(event_ids) == len(asked_meanwhile)
    assert event_ids <= set(sink.of_kind("audit_event"))
