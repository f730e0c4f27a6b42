"""Rate limits for /mcp, shared across workers (and hosts) through Redis when REDIS_URL is set.

When Redis cannot be reached, each worker falls back to counting on its own until Redis answers
again: limits stay in force (per worker, so looser by the number of workers) and /mcp keeps
answering. A rate limiter's outage must not become an outage of the KB tool.
"""

import logging
import math
import time

from django.conf import settings
from limits import parse
from limits.aio.strategies import FixedWindowRateLimiter
from limits.storage import storage_from_string

logger = logging.getLogger(__name__)

# Redis is on the request path: an answer slower than this counts as Redis being down.
REDIS_TIMEOUT_SECONDS = 0.5
# After a failure, the shared store is tried again this long later (not on every request).
SHARED_RETRY_SECONDS = 5.0


class RateLimits:
    def __init__(self, *, redis_url: str = "", per_delegation: str, per_failed_client: str):
        self._local = FixedWindowRateLimiter(storage_from_string("async+memory://"))
        self._shared = None
        if redis_url:
            self._shared = FixedWindowRateLimiter(
                storage_from_string(
                    f"async+{redis_url}",
                    implementation="redispy",
                    socket_timeout=REDIS_TIMEOUT_SECONDS,
                    socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
                )
            )
        self._shared_down_until = 0.0
        self._per_delegation = parse(per_delegation)
        self._per_failed_client = parse(per_failed_client)

    @classmethod
    def from_settings(cls) -> "RateLimits":
        return cls(
            redis_url=settings.REDIS_URL,
            per_delegation=settings.MCP_RATE_LIMIT,
            per_failed_client=settings.MCP_AUTH_FAILURE_LIMIT,
        )

    async def delegation_retry_after(self, delegation_id: int) -> int:
        """0 when the request may proceed (and is counted), else seconds to wait."""
        key = ("mcp-delegation", str(delegation_id))
        if await self._call("hit", self._per_delegation, *key):
            return 0
        return await self._retry_after(self._per_delegation, *key)

    async def failed_authentication_retry_after(self, client: str) -> int:
        """Count one failed authentication from `client`: 0 while its address is within its
        budget, else the seconds until it may fail again."""
        key = ("mcp-auth-failure", client)
        if await self._call("hit", self._per_failed_client, *key):
            return 0
        return await self._retry_after(self._per_failed_client, *key)

    async def _retry_after(self, item, *identifiers: str) -> int:
        stats = await self._call("get_window_stats", item, *identifiers)
        return max(1, math.ceil(stats.reset_time - time.time()))

    async def _call(self, method: str, *args):
        if self._shared is not None and time.monotonic() >= self._shared_down_until:
            try:
                return await getattr(self._shared, method)(*args)
            except Exception as exc:  # redis-py's connection and timeout errors, and the like
                self._shared_down_until = time.monotonic() + SHARED_RETRY_SECONDS
                logger.warning(
                    "rate limits: Redis unavailable (%s); counting per worker for %.0f s",
                    type(exc).__name__,
                    SHARED_RETRY_SECONDS,
                )
        return await getattr(self._local, method)(*args)
