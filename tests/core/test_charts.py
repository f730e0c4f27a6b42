"""Server-drawn SVG charts: each mark says its label and value, heights follow the values, and
nothing a label holds can break out of the drawing."""

import re

import pytest

from core.charts import (
    MAX_MARKS,
    Series,
    bar_chart,
    line_chart,
    stacked_bar_chart,
    tick_values,
)


def bars(svg: str) -> list[tuple[str, float, float]]:
    """(label, value, height) of each bar."""
    return [
        (label, float(value), float(height))
        for height, label, value in re.findall(
            r'<rect class="bar [^"]*"[^>]* height="([\d.]+)" data-label="([^"]*)"'
            r' data-series="[^"]*" data-value="([-\d.]+)"',
            str(svg),
        )
    ]


def test_bars_carry_their_values_and_heights_in_proportion():
    drawn = bars(bar_chart(["강남", "종로", "해운대"], [300, 150, 0], title="보험료 합계"))
    assert [(label, value) for label, value, _ in drawn] == [
        ("강남", 300),
        ("종로", 150),
        ("해운대", 0),
    ]
    assert drawn[0][2] == 2 * drawn[1][2] and drawn[2][2] == 0


def test_stacked_bars_stack_and_link():
    svg = stacked_bar_chart(
        ["19시", "20시"],
        [Series("허용", "a", (3, 1), ("/x?h=19", "")), Series("거부", "b", (1, 2))],
        title="시간별",
    )
    assert '<a href="/x?h=19"><rect class="bar a"' in svg
    assert [value for _, value, _ in bars(svg)] == [3, 1, 1, 2]
    assert "legend-item" in svg  # two series: a legend


def test_a_line_has_a_point_per_month_in_order():
    svg = line_chart(["2026-01", "2026-02", "2026-03"], [10, 30, 20], title="월별")
    points = re.findall(r'<circle [^>]*data-label="([^"]+)" data-value="([\d.]+)"', svg)
    assert points == [("2026-01", "10"), ("2026-02", "30"), ("2026-03", "20")]
    ys = [float(y) for y in re.findall(r'cy="([\d.]+)"', svg)]
    assert ys[1] < ys[2] < ys[0]  # higher values are drawn higher up


def test_labels_are_escaped_and_the_count_is_capped():
    svg = bar_chart(['<script>alert("x")</script>'], [1], title="<b>t</b>")
    assert "<script>" not in svg and "<b>" not in svg
    many = bar_chart([str(i) for i in range(MAX_MARKS + 10)], [1] * (MAX_MARKS + 10), title="t")
    assert len(bars(many)) == MAX_MARKS
    assert bar_chart([], [], title="t") == ""


def test_negative_and_fractional_values_are_drawn_from_zero():
    drawn = bars(bar_chart(["a", "b"], [-2.5, 5], title="t"))
    assert [(v, h > 0) for _, v, h in drawn] == [(-2.5, True), (5.0, True)]


def test_values_too_large_or_not_finite_are_left_out_not_drawn():
    hostile = [10**400, -(10**400), float("inf"), float("nan"), 2e15, 7]
    labels = [f"L{n}" for n in range(len(hostile))]
    assert [(label, value) for label, value, _ in bars(bar_chart(labels, hostile, title="t"))] == [
        ("L5", 7)
    ]
    line = str(line_chart(labels, hostile, title="t"))
    assert re.findall(r'data-label="([^"]*)" data-value="([^"]*)"', line) == [("L5", "7")]
    assert str(bar_chart(labels[:5], hostile[:5], title="t")) == ""


@pytest.mark.parametrize(
    ("floor", "top", "expected"),
    [
        (0, 7, [0, 2, 4, 6]),
        (0, 100, [0, 20, 40, 60, 80, 100]),
        (0, 32000, [0, 10000, 20000, 30000]),
        (-30, 50, [-20, 0, 20, 40]),
        (0, 1, [0, 1]),  # counts: no fractional ticks
        (0, 0.5, [0, 0.1, 0.2, 0.3, 0.4, 0.5]),
    ],
)
def test_the_value_axis_has_round_ticks_with_zero(floor, top, expected):
    assert tick_values(floor, top) == expected


def test_a_chart_names_its_unit_and_draws_more_than_two_ticks():
    svg = str(bar_chart(["a", "b", "c"], [10, 45, 30], title="건수", unit="계약 건수"))
    ticks = re.findall(r'data-tick="([^"]+)"', svg)
    assert ticks == ["0", "10", "20", "30", "40"]
    assert '<text class="tick unit"' in svg and "계약 건수" in svg
