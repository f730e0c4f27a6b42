"""429s: per delegation, per client address after failed authentication, shared via Redis."""

import httpx
import pytest
import redis

from conftest import redis_test_database, service_missing
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, Server, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]


@pytest.fixture
def strict_server(world, tmp_path):
    env = {"MCP_RATE_LIMIT": "3/minute", "MCP_AUTH_FAILURE_LIMIT": "4/minute", "REDIS_URL": ""}
    with live_server(tmp_path / "server.log", env) as url:
        yield Server(url=url, log=tmp_path / "server.log")


@pytest.fixture
def redis_url():
    with redis_test_database("rate_limits") as (url, _):
        yield url


def test_a_delegation_over_its_rate_is_429_with_retry_after(strict_server, world):
    token = world.tokens["KB-P-002"]
    statuses = [strict_server.post(rpc("tools/list"), token).status_code for _ in range(5)]
    assert statuses[:3] == [200, 200, 200]
    assert statuses[3:] == [429, 429]
    limited = strict_server.post(rpc("tools/list"), token)
    wait = int(limited.headers["retry-after"])
    assert 1 <= wait <= 60
    # The message names the wait, for clients that show it and ignore the header.
    error = limited.json()["error"]
    assert f"wait {wait} seconds" in error["message"] and error["data"]["retry_after"] == wait
    # Another delegation is not affected.
    assert strict_server.post(rpc("tools/list"), world.tokens["KB-P-003"]).status_code == 200


def test_repeated_failed_authentication_from_one_address_is_429(strict_server, world):
    statuses = [
        strict_server.post(rpc("tools/list"), f"hbvpd_guess-{n:04d}-aaaaaaaaaaaaaaaa").status_code
        for n in range(6)
    ]
    assert statuses[:4] == [401] * 4
    assert statuses[4:] == [429, 429]
    limited = strict_server.post(rpc("tools/list"), "hbvpd_guess-0007-aaaaaaaaaaaaaaaa")
    wait = int(limited.headers["retry-after"])
    assert f"wait {wait} seconds" in limited.json()["error"]["message"]
    # A valid token from that address is served: others' failures never lock it out.
    response = strict_server.post(rpc("tools/list"), world.tokens["KB-P-004"])
    assert response.status_code == 200


def test_the_limit_is_shared_across_workers_through_redis(world, tmp_path, redis_url):
    env = {
        "MCP_RATE_LIMIT": "6/minute",
        "MCP_AUTH_FAILURE_LIMIT": "100/minute",
        "REDIS_URL": redis_url,
    }
    token = world.tokens["KB-P-005"]
    with live_server(tmp_path / "server.log", env, workers=2) as url:
        # New connections spread requests over both worker processes.
        statuses = [
            httpx.post(
                f"{url}/mcp",
                json=rpc("tools/list"),
                headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
                timeout=10,
            ).status_code
            for _ in range(10)
        ]
    assert statuses.count(200) == 6
    assert statuses.count(429) == 4


class PrivateRedis:
    """A redis-server of this test's own on a free loopback port, to stop and start at will."""

    def __init__(self, tmp_path):
        from tests.live import free_port

        self.port = free_port()
        self.tmp_path = tmp_path
        self.process = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        import shutil
        import subprocess
        import time

        binary = shutil.which("redis-server")
        if binary is None:
            service_missing("redis-server is not installed")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        for _ in range(50):
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.1)
        raise RuntimeError("private redis-server did not start")

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def test_without_redis_limits_fall_back_per_worker_and_come_back(private_redis, monkeypatch):
    import asyncio

    from mcpserver import ratelimit

    monkeypatch.setattr(ratelimit, "SHARED_RETRY_SECONDS", 0.2)
    limits = ratelimit.RateLimits(
        redis_url=private_redis.url, per_delegation="3/minute", per_failed_client="5/minute"
    )

    async def five_requests():
        return [await limits.delegation_retry_after(7) for _ in range(5)]

    async def scenario():
        shared = await five_requests()  # counted in Redis
        private_redis.stop()
        alone = await five_requests()  # Redis gone: counted in this worker, never an error
        private_redis.start()  # an empty Redis: a new window
        await asyncio.sleep(0.3)
        again = await five_requests()
        return shared, alone, again

    shared, alone, again = asyncio.run(scenario())
    assert [s == 0 for s in shared] == [True, True, True, False, False]
    assert [s == 0 for s in alone] == [True, True, True, False, False]
    assert [s == 0 for s in again] == [True, True, True, False, False]
    client = redis.Redis.from_url(private_redis.url)
    assert client.dbsize() > 0  # the last window was counted in Redis again
