"""Calendar helpers: relative periods ("지난달", "최근 3개월") against an as-of date."""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import dataclass


def add_months(day: dt.date, months: int) -> dt.date:
    """Shift by whole months, clipping the day (2026-01-31 + 1 month -> 2026-02-28)."""
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    year = min(max(year, 1), 9999)
    last_day = calendar.monthrange(year, month + 1)[1]
    return dt.date(year, month + 1, min(day.day, last_day))


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def month_end(day: dt.date) -> dt.date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def month_key(day: dt.date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


@dataclass(frozen=True)
class Period:
    """An inclusive date range plus how it was expressed, so it can be shown back to the user."""

    start: dt.date
    end: dt.date
    label: str  # Korean, e.g. "2026-04~2026-06 (최근 3개월)"
    whole_months: bool = True  # False for day-precise ranges such as "3개월 이내"

    @property
    def single_month(self) -> bool:
        return self.whole_months and month_key(self.start) == month_key(self.end)

    def months(self) -> tuple[str, str]:
        return month_key(self.start), month_key(self.end)

    def clipped(self, *, not_after: dt.date | None = None, not_before: dt.date | None = None):
        """Clip to what can exist (no payments after as-of); an empty result keeps the original."""
        start, end = self.start, self.end
        if not_after is not None and end > not_after:
            end = month_end(not_after) if self.whole_months else not_after
        if not_before is not None and start < not_before:
            start = month_start(not_before) if self.whole_months else not_before
        if start > end:
            return self
        return Period(start, end, self.label, self.whole_months)


def month_period(year: int, month: int, label: str = "") -> Period:
    first = dt.date(year, month, 1)
    return Period(first, month_end(first), label or month_key(first))


def months_period(first: dt.date, last: dt.date, label: str) -> Period:
    """Whole months from the month of `first` through the month of `last`."""
    return Period(month_start(first), month_end(last), label)


def describe(period: Period, *, with_label: bool = True) -> str:
    """'2026-04~2026-06 (최근 3개월)'; a single month is just '2026-06'."""
    if period.whole_months:
        first, last = period.months()
        text = first if first == last else f"{first}~{last}"
    elif period.start == period.end:
        text = period.start.isoformat()
    else:
        text = f"{period.start.isoformat()}~{period.end.isoformat()}"
    if with_label and period.label and period.label != text:
        return f"{text} ({period.label})"
    return text
