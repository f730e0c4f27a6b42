"""Group commit for request events: concurrent requests share one transaction per batch.

Each caller awaits its own event's commit, so nothing is answered before it is recorded. A
request's event is queued on the event loop; if no append is under way, one starts in the loop's
executor (the threads the gate's database reads use) and takes every event queued so far, up to
MAX_BATCH. Events queued while it runs make up the next batch; a lone request never waits for
others. The queue is only touched on the event loop's thread, so it needs no lock, and there is no
writer thread of its own: a dedicated thread competing for the interpreter measured about 1 ms of
CPU more per `tools/call` (docs/decisions/0003-…).
"""

import asyncio
import logging
from dataclasses import dataclass

from django.db import close_old_connections

from audit.services import audit_events_append
from core import tracing

logger = logging.getLogger("hyperbook.audit")

MAX_BATCH = 256


class AuditWriter:
    def __init__(self) -> None:
        self._queued: list[tuple[dict, asyncio.Future]] = []
        self._appending: asyncio.Task | None = None

    async def record(self, values: dict) -> "Appended":
        """Append one event; returns its id and sequence once it is committed (raises if it
        could not be)."""
        future = asyncio.get_running_loop().create_future()
        self._queued.append((values, future))
        if self._appending is None:
            self._appending = asyncio.ensure_future(self._append_queued())
        return await future

    async def close(self) -> None:
        """Return once every queued event is written (or has failed)."""
        while self._appending is not None:
            await asyncio.shield(self._appending)

    async def _append_queued(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queued:
                batch, self._queued = self._queued[:MAX_BATCH], self._queued[MAX_BATCH:]
                try:
                    outcomes = await loop.run_in_executor(
                        None, _append_batch, [values for values, _ in batch]
                    )
                except asyncio.CancelledError:
                    for _, future in batch:
                        future.cancel()
                    raise
                except Exception as exc:  # the executor itself failed: nobody is left waiting
                    outcomes = [exc] * len(batch)
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():
                        continue
                    if isinstance(outcome, Appended):
                        future.set_result(outcome)
                    else:
                        future.set_exception(outcome)
        finally:
            self._appending = None


@dataclass(frozen=True)
class Appended:
    """Where a committed event is in the log: what a caller may be told to ask a receipt for."""

    event_id: str
    sequence: int


def _append_batch(events: list[dict]) -> list["Appended | BaseException"]:
    """Append the events in one transaction; if that fails, each on its own, so that one bad event
    does not fail its neighbours. Returns each event's place in the log, or its error."""
    close_old_connections()
    try:
        with tracing.span("audit.append", _traced(events) if tracing.enabled() else None):
            appended = audit_events_append(events=events)
        return [Appended(str(event.id), event.sequence) for event in appended]
    except Exception as exc:
        if len(events) == 1:
            # Reported to the waiting request, which then fails closed (answers 503).
            logger.exception("audit: could not append an event")
            return [exc]
        return [_append_batch([values])[0] for values in events]
    finally:
        close_old_connections()


def _traced(events: list[dict]) -> dict:
    return {"hyperbook.request_ids": [str(values.get("request_id") or "") for values in events]}
