"""Rate limits for /mcp, shared across workers through Redis when REDIS_URL is set."""

import math
import time

from django.conf import settings
from limits import parse
from limits.aio.strategies import FixedWindowRateLimiter
from limits.storage import storage_from_string


class RateLimits:
    def __init__(self, *, redis_url: str = "", per_delegation: str, per_failed_client: str):
        uri = f"async+{redis_url}" if redis_url else "async+memory://"
        options = {"implementation": "redispy"} if redis_url else {}
        self._limiter = FixedWindowRateLimiter(storage_from_string(uri, **options))
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
        if await self._limiter.hit(self._per_delegation, "mcp-delegation", str(delegation_id)):
            return 0
        return await self._retry_after(self._per_delegation, "mcp-delegation", str(delegation_id))

    async def failed_client_retry_after(self, client: str) -> int:
        """Seconds a client address must wait after too many failed authentications (0: none)."""
        if await self._limiter.test(self._per_failed_client, "mcp-auth-failure", client):
            return 0
        return await self._retry_after(self._per_failed_client, "mcp-auth-failure", client)

    async def count_failed_authentication(self, client: str) -> None:
        await self._limiter.hit(self._per_failed_client, "mcp-auth-failure", client)

    async def _retry_after(self, item, *identifiers: str) -> int:
        stats = await self._limiter.get_window_stats(item, *identifiers)
        return max(1, math.ceil(stats.reset_time - time.time()))
