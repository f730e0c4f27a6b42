"""The console's cells: figures with thousands separators, money in won, text as it is."""

import pytest

from registry.answer_format import cell_text


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        ("amount", 32000, "32,000원"),
        ("monthly_premium", 125000.0, "125,000원"),
        ("sum_amount", 1234567, "1,234,567원"),
        ("contract_count", 1234, "1,234"),
        ("avg_age", 41.256, "41.26"),
        ("status", "paid", "paid"),
        ("phone", "010-****-1234", "010-****-1234"),
        ("amount", None, ""),
        ("flag", True, "True"),
        ("product_code", "P01", "P01"),
    ],
)
def test_a_cell_reads_as_its_column_says(column, value, text):
    assert cell_text(value, column_name=column) == text


def test_bars_are_labelled_by_names_not_codes():
    import re

    from registry.answer_chart import answer_chart

    rendered = {
        "columns": [
            {"name": "product_code"},
            {"name": "product_name"},
            {"name": "contract_count"},
        ],
        "rows": [["AUTO-02", "KB운전자보험", 23], ["LIFE-01", "KB종신보험", 18]],
        "chart": {
            "kind": "bar",
            "labels": ["product_code", "product_name"],
            "value": "contract_count",
            "title": "건수",
            "unit": "건수",
        },
    }
    svg = str(answer_chart(rendered))
    assert re.findall(r'data-label="([^"]+)"', svg) == ["KB운전자보험", "KB종신보험"]
    assert "AUTO-02" not in svg
