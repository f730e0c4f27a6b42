"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded. One writer
thread appends what has queued up; a transaction costs about as much as four events, so the writer
waits briefly for the events of requests already in progress (announced with `expect`) to join the
batch, as PostgreSQL's commit_delay does. A lone request never waits: nobody else is expected.
"""

import asyncio
import logging
import queue
import threading
import time

from django.db import close_old_connections

from audit.services import audit_events_append

logger = logging.getLogger("hyperbook.audit")

MAX_BATCH = 256
# The longest the first event of a batch waits for expected siblings. A few requests' worth of
# work: long enough for a burst to share one commit, short next to the p99 target.
GROUP_COMMIT_WAIT_S = 0.004


class AuditWriter:
    def __init__(self, *, group_commit_wait: float = GROUP_COMMIT_WAIT_S) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._group_commit_wait = group_commit_wait
        self._expected = 0  # requests in progress whose event has not been queued yet
        self._expected_lock = threading.Lock()

    def expect(self) -> None:
        """A request has started; its event will follow (or `forget` says it will not)."""
        with self._expected_lock:
            self._expected += 1

    def forget(self) -> None:
        with self._expected_lock:
            self._expected = max(0, self._expected - 1)

    async def record(self, values: dict, *, expected: bool = False) -> None:
        """Append one event; returns once it is committed (raises if it could not be).

        `expected`: this is the event of a request announced with `expect`."""
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if expected:
            self.forget()
        self._queue.put((values, loop, future))
        await future

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                self._thread.start()

    def _next_batch(self) -> list:
        batch = [self._queue.get()]
        deadline = None
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self._queue.get_nowait())
                continue
            except queue.Empty:
                pass
            if self._expected <= 0:
                break
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._group_commit_wait
            if now >= deadline:
                break
            try:
                batch.append(self._queue.get(timeout=deadline - now))
            except queue.Empty:
                break
        return batch

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
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
