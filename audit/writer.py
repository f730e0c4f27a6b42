"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded. One
writer thread, whenever woken, takes every event queued so far (up to MAX_BATCH) and appends them
in one transaction; events that arrive while it writes make up the next batch. A lone request
never waits for others.
"""

import asyncio
import logging
import queue
import threading

from django.db import close_old_connections, connections

from audit.services import audit_events_append

logger = logging.getLogger("hyperbook.audit")

MAX_BATCH = 256
_STOP = object()


class AuditWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # (values, loop, future) or _STOP
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def record(self, values: dict) -> None:
        """Append one event; returns once it is committed (raises if it could not be)."""
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put((values, loop, future))
        await future

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop the thread and close its database connection."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)
            thread.join(timeout)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        try:
            stopping = False
            while not stopping:
                batch = [self._queue.get()]
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stopping = _STOP in batch
                batch = [item for item in batch if item is not _STOP]
                if batch:
                    self._write(batch)
        finally:
            connections.close_all()  # this thread's connections only

    def _write(self, batch: list) -> None:
        close_old_connections()
        try:
            audit_events_append(events=[values for values, _, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                # Reported to the waiting request, which then fails closed (answers 503).
                logger.exception("audit: could not append an event")
                _settle_in_loops(batch, exc)
                return
            # One bad event must not fail its neighbours: write them one by one.
            for item in batch:
                self._write([item])
            return
        _settle_in_loops(batch, None)


def _settle_in_loops(batch: list, error: BaseException | None) -> None:
    by_loop: dict = {}
    for _, loop, future in batch:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, futures, error)
        except RuntimeError:  # that loop has closed: nobody is waiting there any more
            logger.debug("audit: %s event(s) settled for a closed event loop", len(futures))


def _settle(futures: list[asyncio.Future], error: BaseException | None) -> None:
    for future in futures:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
