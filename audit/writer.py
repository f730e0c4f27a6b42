"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded. One writer
thread appends whatever has queued up while the previous batch was being written, so the cost of a
transaction (and of the chain lock) is spread over all the requests that arrived meanwhile.
"""

import asyncio
import logging
import queue
import threading

from django.db import close_old_connections

from audit.services import audit_events_append

logger = logging.getLogger("hyperbook.audit")

MAX_BATCH = 256


class AuditWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    async def record(self, values: dict) -> None:
        """Append one event; returns once it is committed (raises if it could not be)."""
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((values, loop, future))
        await future

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            error = None
            close_old_connections()
            try:
                audit_events_append(events=[values for values, _, _ in batch], return_events=False)
            except Exception as exc:  # reported to every waiting request, which then fails closed
                logger.exception("audit: could not append %s event(s)", len(batch))
                error = exc
            by_loop: dict = {}
            for _, loop, future in batch:
                by_loop.setdefault(loop, []).append(future)
            for loop, futures in by_loop.items():
                loop.call_soon_threadsafe(_settle, futures, error)


def _settle(futures: list[asyncio.Future], error: BaseException | None) -> None:
    for future in futures:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
