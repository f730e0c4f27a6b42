"""Charts drawn on the server as SVG: bars for categories, a line for months, stacked bars for
counts over time. No script, no CDN and no style attribute (the Content-Security-Policy allows
none): sizes are SVG attributes and colours come from classes in hyperbook/admin.css.

Every mark carries its label and value (`data-label`, `data-value`, a `<title>` tooltip), so a
reader, a screen reader and a test can each check the drawing against the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 240
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 20, 48
MAX_MARKS = 60  # more categories than this are not a chart anymore: the table shows them all
# Larger magnitudes (10^400 from a hostile server, or an infinity) cannot be scaled or shown as
# figures: such a value is left out of the drawing, and the table beside it still shows it.
MAX_DRAWN = 1e15


@dataclass(frozen=True)
class Series:
    name: str
    css_class: str  # a class of admin.css that colours it
    values: tuple[float, ...]
    links: tuple[str, ...] = ()  # one URL per value ("" for none)


def drawable(value) -> bool:
    """A real number no larger than MAX_DRAWN either way."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value)) and abs(value) <= MAX_DRAWN
    except OverflowError:  # an integer beyond any float
        return False


def bar_chart(
    labels: list[str],
    values: list[float],
    *,
    title: str,
    links: list[str] | None = None,
    unit: str = "",
) -> SafeString:
    """One bar per category (at most MAX_MARKS); negative values are drawn from zero down."""
    return stacked_bar_chart(
        labels,
        [Series(title, "series-0", tuple(values), tuple(links or ()))],
        title=title,
        unit=unit,
    )


def stacked_bar_chart(
    labels: list[str], series: list[Series], *, title: str, unit: str = ""
) -> SafeString:
    """Bars of several series stacked; a category with a value that is not `drawable` is left
    out."""
    kept = [
        i
        for i in range(min(len(labels), MAX_MARKS))
        if all(i < len(s.values) and drawable(s.values[i]) for s in series)
    ]
    labels = [str(labels[i]) for i in kept]
    series = [
        Series(
            s.name,
            s.css_class,
            tuple(s.values[i] for i in kept),
            tuple(s.links[i] if i < len(s.links) else "" for i in kept),
        )
        for s in series
    ]
    count = len(labels)
    if not count or not series:
        return mark_safe("")  # noqa: S308 (a constant)
    totals = [sum(max(s.values[i], 0) for s in series) for i in range(count)]
    floor = min([0.0, *(s.values[i] for s in series for i in range(count))])
    top = max([0.0, *totals]) or 1.0
    scale = _Scale(floor, top)
    slot = scale.plot_width / count
    width = max(1.0, slot * 0.8)
    marks = []
    for i, label in enumerate(labels):
        x = MARGIN_LEFT + i * slot + (slot - width) / 2
        base = 0.0
        for s in series:
            value = s.values[i]
            start, end = (base, base + value) if value >= 0 else (value, 0.0)
            y, height = scale.y(end), max(scale.y(start) - scale.y(end), 0.0)
            rect = format_html(
                '<rect class="bar {}" x="{}" y="{}" width="{}" height="{}" data-label="{}" '
                'data-series="{}" data-value="{}"><title>{} · {}: {}</title></rect>',
                s.css_class,
                _n(x),
                _n(y),
                _n(width),
                _n(height),
                label,
                s.name,
                _raw(value),
                label,
                s.name,
                _value(value),
            )
            link = s.links[i] if i < len(s.links) else ""
            marks.append(format_html('<a href="{}">{}</a>', link, rect) if link else rect)
            if value >= 0:
                base += value
    legend = series if len(series) > 1 else ()
    return _svg(title, scale, labels, slot, marks, legend=legend, unit=unit)


def line_chart(labels: list[str], values: list[float], *, title: str, unit: str = "") -> SafeString:
    """A line through one point per label (months, in order); a value that is not `drawable` is
    left out."""
    pairs = [(str(label), value) for label, value in zip(labels, values, strict=False)]
    pairs = [(label, value) for label, value in pairs[:MAX_MARKS] if drawable(value)]
    labels, values = [label for label, _ in pairs], [value for _, value in pairs]
    if not labels:
        return mark_safe("")  # noqa: S308 (a constant)
    scale = _Scale(min([0.0, *values]), max([0.0, *values]) or 1.0)
    slot = scale.plot_width / len(labels)
    points = [(MARGIN_LEFT + slot * (i + 0.5), scale.y(v)) for i, v in enumerate(values)]
    path = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
    marks = [format_html('<polyline class="line series-0" fill="none" points="{}"/>', path)]
    for (x, y), label, value in zip(points, labels, values, strict=True):
        marks.append(
            format_html(
                '<circle class="point series-0" cx="{}" cy="{}" r="3" data-label="{}" '
                'data-value="{}"><title>{}: {}</title></circle>',
                _n(x),
                _n(y),
                label,
                _raw(value),
                label,
                _value(value),
            )
        )
    return _svg(title, scale, labels, slot, marks, legend=(), unit=unit)


class _Scale:
    def __init__(self, floor: float, top: float):
        self.floor, self.top = floor, top
        self.plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
        self.plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def y(self, value: float) -> float:
        span = (self.top - self.floor) or 1.0
        return MARGIN_TOP + (self.top - value) / span * self.plot_height


def tick_values(floor: float, top: float, *, about: int = 5) -> list[float]:
    """Round values from `floor` to `top` for the value axis: steps of 1, 2 or 5 × 10ⁿ, about
    `about` of them, always with zero; steps below 1 only when the values are that small."""
    span = (top - floor) or 1.0
    raw = span / about
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if top - floor >= 1:
        step = max(step, 1.0)
    first = math.ceil(floor / step)
    last = math.floor(top / step)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _svg(title, scale: _Scale, labels, slot, marks, *, legend, unit="") -> SafeString:
    axis_y = scale.y(0.0)
    ticks = [
        format_html(
            '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
            '<text class="tick" x="{}" y="{}" text-anchor="end" data-tick="{}">{}</text>',
            MARGIN_LEFT,
            _n(scale.y(value)),
            WIDTH - MARGIN_RIGHT,
            _n(scale.y(value)),
            MARGIN_LEFT - 6,
            _n(scale.y(value) + 4),
            _raw(value),
            _value(value),
        )
        for value in tick_values(scale.floor, scale.top)
    ]
    if unit:
        # The value axis's unit, above its top tick.
        ticks.append(
            format_html('<text class="tick unit" x="{}" y="{}">{}</text>', 4, MARGIN_TOP - 2, unit)
        )
    every = max(1, round(len(labels) / 12))  # at most about a dozen axis labels
    names = [
        format_html(
            '<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>',
            _n(MARGIN_LEFT + slot * (i + 0.5)),
            HEIGHT - MARGIN_BOTTOM + 16,
            _short(label),
        )
        for i, label in enumerate(labels)
        if i % every == 0
    ]
    keys = [
        format_html(
            '<g class="legend-item"><rect class="bar {}" x="{}" y="{}" width="10" height="10"/>'
            '<text class="tick" x="{}" y="{}">{}</text></g>',
            s.css_class,
            _n(MARGIN_LEFT + i * 110),
            HEIGHT - 18,
            _n(MARGIN_LEFT + i * 110 + 14),
            HEIGHT - 9,
            s.name,
        )
        for i, s in enumerate(legend)
    ]
    body = "".join(str(part) for part in (*ticks, *names, *marks, *keys))
    return format_html(
        '<svg class="chart" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
        'aria-label="{}"><title>{}</title>'
        '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>{}</svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        title,
        title,
        MARGIN_LEFT,
        _n(axis_y),
        WIDTH - MARGIN_RIGHT,
        _n(axis_y),
        mark_safe(body),  # noqa: S308 (every part above was built with format_html)
    )


def _n(number: float) -> str:
    return f"{number:.1f}"


def _value(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"


def _raw(value: float) -> str:
    """The value as a machine reads it (no thousands separators)."""
    return str(int(value)) if float(value).is_integer() else repr(round(float(value), 4))


def _short(label: str) -> str:
    return label if len(label) <= 14 else label[:13] + "…"
