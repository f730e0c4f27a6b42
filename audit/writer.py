"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded. One writer
thread appends whatever has queued up. A transaction costs about as much as four events, so a
batch waits for the events of requests already in progress (announced with `expect`), as
PostgreSQL's commit_delay does. It waits while they keep coming: it is committed once every
expected event is in, or when none has come for `gap`, and at the latest `max_wait` after its
first. (With one fixed deadline shorter than the others' remaining work, a burst splits into two
halves that keep alternating, each committing while the other is served: twice the commits.) A
lone request never waits: nobody else is expected. The writer is woken once per batch, and runs
below the event loop's priority (core/background.py), so it fills the loop's idle time instead of
preempting it.
"""

import asyncio
import logging
import queue
import threading
import time

from django.db import close_old_connections, connections

from audit.services import audit_events_append
from core.background import lower_current_thread_priority

logger = logging.getLogger("hyperbook.audit")

MAX_BATCH = 256
# A batch waits for expected siblings while one arrives at least every GROUP_COMMIT_GAP_S (a few
# requests' worth of work), and never longer than GROUP_COMMIT_MAX_WAIT_S, short next to a p99.
GROUP_COMMIT_GAP_S = 0.004
GROUP_COMMIT_MAX_WAIT_S = 0.025


class AuditWriter:
    def __init__(
        self, *, gap: float = GROUP_COMMIT_GAP_S, max_wait: float = GROUP_COMMIT_MAX_WAIT_S
    ) -> None:
        self._gap = gap
        self._max_wait = max_wait
        self._lock = threading.Lock()
        self._pending: list = []  # (values, loop, future) waiting for the next transaction
        self._expected = 0  # requests in progress whose event has not been queued yet
        self._first_arrival = self._last_arrival = 0.0  # of the batch being collected
        # Wake-ups for the writer thread: a C-level queue is several times cheaper than an Event.
        self._wakeups: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closing = False

    def expect(self) -> None:
        """A request has started; its event will follow (or `forget` says it will not)."""
        with self._lock:
            self._expected += 1

    def forget(self) -> None:
        with self._lock:
            self._expected = max(0, self._expected - 1)
            ready = bool(self._pending) and self._expected == 0
        if ready:
            self._wake()

    async def record(self, values: dict, *, expected: bool = False) -> None:
        """Append one event; returns once it is committed (raises if it could not be).

        `expected`: this is the event of a request announced with `expect`."""
        self._ensure_thread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        now = time.monotonic()
        with self._lock:
            if expected:
                self._expected = max(0, self._expected - 1)
            self._pending.append((values, loop, future))
            self._last_arrival = now
            first = len(self._pending) == 1
            if first:
                self._first_arrival = now
            ready = self._expected == 0 or len(self._pending) >= MAX_BATCH
        if ready:
            self._wake()
        elif first:
            # Others are on their way: commit when the last of them arrives, or at the deadline.
            loop.call_later(self._gap, self._at_deadline, loop, future)
        await future

    def _at_deadline(self, loop: asyncio.AbstractEventLoop, first: asyncio.Future) -> None:
        with self._lock:
            if not self._pending or self._pending[0][2] is not first:
                return  # the batch this event began has been taken by the writer
            deadline = min(self._last_arrival + self._gap, self._first_arrival + self._max_wait)
            remaining = deadline - time.monotonic()
        if remaining > 0:  # an event came meanwhile: wait on for the rest
            loop.call_later(remaining, self._at_deadline, loop, first)
        else:
            self._wake()

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._closing = False
                self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is pending, then stop the thread and close its database connection."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        self._closing = True
        self._wake()
        thread.join(timeout)

    def _wake(self) -> None:
        self._wakeups.put(None)

    def _run(self) -> None:
        lower_current_thread_priority()
        try:
            while True:
                if not self._closing:
                    self._wakeups.get()
                while not self._wakeups.empty():  # one batch answers every wake-up so far
                    self._wakeups.get_nowait()
                with self._lock:
                    batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                    if self._pending:
                        self._wake()  # more than one batch's worth: go round again at once
                if batch:
                    self._write(batch)
                elif self._closing:
                    return
        finally:
            connections.close_all()  # this thread's connections only

    def _write(self, batch: list) -> None:
        close_old_connections()
        try:
            audit_events_append(events=[values for values, _, _ in batch], return_events=False)
        except Exception as exc:
            if len(batch) == 1:
                # Reported to the waiting request, which then fails closed (answers 503).
                logger.exception("audit: could not append an event")
                return _settle_in_loops(batch, exc)
            # One bad event must not fail its neighbours: write them one by one.
            for item in batch:
                self._write([item])
            return None
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
