"""The auditors' overview: events per hour by outcome, refusals by reason, the delivery lag, the
chain and checkpoint status. Reads aggregates over an indexed time range, never the whole table.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone

from audit import selectors
from audit.models import AuditCheckpoint, AuditEvent, ChainVerification

Outcome = AuditEvent.Outcome
# Requests refused before or instead of an answer are AuditEvent.REFUSED_OUTCOMES; a summary event
# counts those past the per-address budget (its `changes.counts` holds "status reason" -> n).
HOUR_FORMAT = "%Y-%m-%dT%H"  # how an hour is named in the event list's `hour` filter
# A flood from many addresses writes one summary per address and window: past this many in a day,
# only the newest are read (the page says so), so the page stays fast whatever a flood wrote.
SUMMARIES_READ_MAX = 2000


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    count: int
    recorded: int  # of which recorded one by one (the rest only counted in summaries)


@dataclass(frozen=True)
class AuditOverview:
    start: dt.datetime
    hours: tuple[dt.datetime, ...]  # each hour's start, oldest first, in the current time zone
    by_outcome: dict[str, tuple[int, ...]]  # outcome -> events per hour (outcomes seen only)
    refusals: tuple[ReasonCount, ...]  # most first
    summaries_capped: bool  # more summaries than SUMMARIES_READ_MAX: only the newest were read
    backlog: int
    oldest_undelivered: dt.datetime | None
    delivery_lag: dt.timedelta | None
    chain: ChainVerification | None
    checkpoint: AuditCheckpoint | None
    checkpoint_age: dt.timedelta | None

    @property
    def total(self) -> int:
        return sum(sum(counts) for counts in self.by_outcome.values())


def audit_overview(*, hours: int = 24, now: dt.datetime | None = None) -> AuditOverview:
    now = now or timezone.now()
    local_now = timezone.localtime(now)
    last_hour = local_now.replace(minute=0, second=0, microsecond=0)
    starts = tuple(last_hour - dt.timedelta(hours=hours - 1 - i) for i in range(hours))
    start = starts[0]
    recent = AuditEvent.objects.filter(occurred_at__gte=start)

    index = {hour: i for i, hour in enumerate(starts)}
    per_outcome: dict[str, list[int]] = {}
    rows = (
        recent.annotate(hour=TruncHour("occurred_at"))
        .values_list("hour", "outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    for hour, outcome, n in rows:
        slot = index.get(timezone.localtime(hour))
        if slot is not None:
            per_outcome.setdefault(outcome, [0] * hours)[slot] += n

    recorded = Counter(
        dict(
            recent.filter(outcome__in=AuditEvent.REFUSED_OUTCOMES)
            .values_list("detail")
            .annotate(n=Count("id"))
            .order_by()
            .values_list("detail", "n")
        )
    )
    counted = Counter(recorded)
    summaries = list(
        recent.filter(outcome=Outcome.SUMMARY)
        .order_by("-occurred_at")
        .values_list("changes", flat=True)[: SUMMARIES_READ_MAX + 1]
    )
    summaries_capped = len(summaries) > SUMMARIES_READ_MAX
    for changes in summaries[:SUMMARIES_READ_MAX]:
        for key, n in ((changes or {}).get("counts") or {}).items():
            _, _, reason = str(key).partition(" ")
            if isinstance(n, int):
                counted[reason or str(key)] += n

    backlog, oldest = selectors.audit_backlog()
    checkpoint = selectors.latest_checkpoint()
    return AuditOverview(
        start=start,
        hours=starts,
        by_outcome={
            outcome.value: tuple(per_outcome[outcome.value])
            for outcome in Outcome
            if outcome.value in per_outcome
        },
        refusals=tuple(
            ReasonCount(reason or "-", n, recorded.get(reason, 0))
            for reason, n in counted.most_common()
        ),
        summaries_capped=summaries_capped,
        backlog=backlog,
        oldest_undelivered=oldest,
        delivery_lag=(now - oldest) if oldest else None,
        chain=selectors.chain_status(),
        checkpoint=checkpoint,
        checkpoint_age=(now - checkpoint.created_at) if checkpoint else None,
    )
