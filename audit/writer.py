"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded, while the
cost of a transaction (and of the chain lock) is spread over everything that arrived meanwhile.
"""

import asyncio

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from audit.services import audit_events_append

MAX_BATCH = 256


def _append_in_thread(events: list[dict]) -> None:
    close_old_connections()
    try:
        audit_events_append(events=events)
    finally:
        close_old_connections()


class AuditWriter:
    def __init__(self) -> None:
        self._pending: list[tuple[dict, asyncio.Future]] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._append = sync_to_async(_append_in_thread, thread_sensitive=False)

    async def record(self, values: dict) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done():
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._run())
        future = loop.create_future()
        self._pending.append((values, future))
        self._wakeup.set()
        await future

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                try:
                    await self._append([values for values, _ in batch])
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
