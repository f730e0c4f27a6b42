"""What an /mcp request's audit event records: the gate's findings, never a token or prompt text.

Refusals of unauthenticated requests (401, the failed-authentication 429, a Host or Origin 403)
are recorded one by one up to a budget per client address and window; past it they are counted
into one summary event per address and window, so a flood cannot fill the log and every request
is still accounted for.
"""

import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings

from audit.models import AuditEvent
from audit.writer import Appended, AuditWriter
from mcpserver.records import RequestRecord

# Past this many addresses in one window, further ones share one summary ("*"): an attacker
# with many addresses cannot make the budget itself grow without bound.
MAX_TRACKED_ADDRESSES = 10_000

_UNAUTHENTICATED_OUTCOMES = (
    AuditEvent.Outcome.UNAUTHENTICATED,
    AuditEvent.Outcome.REFUSED_HOST,
    AuditEvent.Outcome.REFUSED_ORIGIN,
)


def event_values(record: RequestRecord) -> dict:
    principal = record.principal
    return {
        "action": record.action,
        "outcome": record.outcome or AuditEvent.Outcome.ERROR,  # the gate always sets one
        "http_status": record.status or None,
        "request_id": record.request_id,
        "client_request_id": record.client_request_id or None,
        "rpc_method": _text(record.rpc_method),
        "tool": _text(record.tool),
        "stakeholder_id": principal.stakeholder_id if principal else "",
        "stakeholder_role": principal.role if principal else "",
        "delegation_id": principal.delegation_id if principal else None,
        "token_prefix": principal.display_prefix if principal else "",
        "token_fingerprint": principal.fingerprint if principal else "",
        "client_address": _text(record.client),
        "origin": _text(record.origin or ""),
        "user_agent": _text(record.user_agent),
        "latency_ms": round(record.latency_ms, 3),
        "row_count": record.row_count,
        "masked_columns": [_text(c) for c in record.masked_columns],
        "prompt_length": record.prompt_length,
        "prompt_hash": record.prompt_hash,
        "detail": _text(record.reason or ""),
    }


def _text(value: str) -> str:
    """Text every database stores: a lone surrogate (valid in a Python str, not in UTF-8) and a
    NUL character (valid UTF-8, refused by PostgreSQL's text types) are written as their escapes,
    so that an event can always be hashed and stored, whatever a client sent."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def is_unauthenticated_refusal(record: RequestRecord) -> bool:
    """Refused before anyone was identified: what a flood without a valid token produces."""
    return record.principal is None and (
        record.outcome in _UNAUTHENTICATED_OUTCOMES
        or record.reason == AuditEvent.Reason.AUTH_RATE_LIMITED
    )


@dataclass
class RefusalBudget:
    """Which unauthenticated refusals are recorded one by one, and the counts of the rest."""

    limit: int
    window_seconds: float
    window_start: float | None = None  # time.time() of the window's first refusal
    recorded: Counter = field(default_factory=Counter)  # address -> refusals recorded alone
    counted: dict[str, Counter] = field(default_factory=dict)  # address -> (status reason) -> n

    def admit(self, address: str, now: float) -> bool:
        """True: record this refusal as its own event. False: count it for a summary."""
        if self.window_start is None:
            self.window_start = now  # a window begins with its first refusal
        if self.recorded[address] < self.limit:
            self.recorded[address] += 1
            return True
        return False

    def ended(self, now: float) -> bool:
        return self.window_start is not None and now >= self.window_start + self.window_seconds

    def count(self, address: str, key: str) -> None:
        if address not in self.counted and len(self.counted) >= MAX_TRACKED_ADDRESSES:
            address = "*"
        self.counted.setdefault(address, Counter())[key] += 1


def summary_event_values(address: str, counts: Counter, start: float, end: float) -> dict:
    def moment(seconds: float) -> str:
        return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()

    total = sum(counts.values())
    return {
        "action": AuditEvent.Action.MCP_REFUSALS_SUMMARY,
        "outcome": AuditEvent.Outcome.SUMMARY,
        "client_address": _text(address),
        "detail": f"{total} refusals past the per-address budget",
        "changes": {
            "window_start": moment(start),
            "window_end": moment(end),
            "total": total,
            "counts": dict(sorted(counts.items())),
        },
    }


class RequestAuditor:
    """The gate's audit hook: every request recorded at its end."""

    def __init__(self, writer: AuditWriter | None = None):
        self.writer = writer or AuditWriter()
        self.budget = RefusalBudget(
            limit=settings.AUDIT_REFUSALS_PER_ADDRESS,
            window_seconds=settings.AUDIT_REFUSAL_WINDOW_SECONDS,
        )
        self._unwritten: list[dict] = []  # summaries of ended windows not yet committed

    async def close(self) -> None:
        await self.writer.close()

    async def completed(self, record: RequestRecord) -> Appended | None:
        """Returns once the request's event is committed, with its place in the log (None when
        it is only counted for a summary); raises if it could not be."""
        if is_unauthenticated_refusal(record) and not await self._admit(record):
            return None  # counted for its window's summary
        return await self.writer.record(event_values(record))

    async def _admit(self, record: RequestRecord) -> bool:
        address = record.client or "unknown"
        now = time.time()
        if self.budget.ended(now):
            await self.flush(final=False)
        admitted = self.budget.admit(address, now)
        if not admitted:
            self.budget.count(address, f"{record.status} {record.reason or record.outcome}")
        return admitted

    async def flush(self, *, final: bool) -> int:
        """Write the summaries of a window that has ended (or of the current one at shutdown,
        `final`), and start the next window. Returns how many summaries were written."""
        now = time.time()
        budget = self.budget
        if budget.window_start is not None and (final or budget.ended(now)):
            self.budget = RefusalBudget(limit=budget.limit, window_seconds=budget.window_seconds)
            end = min(now, budget.window_start + budget.window_seconds)
            self._unwritten += [
                summary_event_values(address, counts, budget.window_start, end)
                for address, counts in budget.counted.items()
            ]
        written = 0
        while self._unwritten:
            # Taken off the list only once committed: a failed write is tried again next time.
            await self.writer.record(self._unwritten[0])
            self._unwritten.pop(0)
            written += 1
        return written
