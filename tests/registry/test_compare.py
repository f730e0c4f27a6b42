"""Compare's sides as the console shows them: row counts and masked columns, from the kept turns
(registry.compare); no server is needed."""

from registry.compare import ComparedSide, Comparison
from registry.console import masked_labels, rendered_answer
from registry.models import ConsoleTurn


def answer(rows: int, *, truncated: bool = False, masked=()) -> dict:
    columns = [
        {"name": "customer_id", "label": "고객 ID"},
        {"name": "phone", "label": "전화번호"},
        {"name": "rrn", "label": ""},
    ]
    return {
        "columns": columns,
        "rows": [{"customer_id": f"C{i:04d}", "phone": "010", "rrn": "x"} for i in range(rows)],
        "row_count": rows,
        "truncated": truncated,
        "masked_columns": list(masked),
    }


def turn(stakeholder_id: str, rows: int, **kwargs) -> ConsoleTurn:
    return ConsoleTurn(
        stakeholder_id=stakeholder_id,
        row_count=rows,
        rendered=rendered_answer(answer(rows, **kwargs)),
    )


def test_each_side_has_its_row_count_and_whether_more_rows_were_left_out():
    planner, manager = Comparison(turn("KB-P-001", 30), turn("KB-M-001", 50, truncated=True)).sides
    assert (planner.row_count, planner.truncated) == (30, False)
    assert (manager.row_count, manager.truncated) == (50, True)


def test_without_a_kept_count_the_side_counts_its_rows():
    kept = turn("KB-P-001", 7)
    kept.row_count = None
    assert ComparedSide(kept).row_count == 7


def test_masked_columns_are_named_by_their_labels_in_the_answers_order():
    side = ComparedSide(turn("KB-M-001", 3, masked=["rrn", "phone"]))
    # An unlabelled column goes by its name.
    assert side.masked_columns == ["전화번호", "rrn"]
    assert ComparedSide(turn("KB-P-001", 3)).masked_columns == []


def test_masked_labels_of_no_answer_is_nothing():
    assert masked_labels(None) == [] and masked_labels({}) == []
    assert masked_labels({"columns": [{"name": "phone", "label": "전화번호"}]}) == []


def test_columns_only_one_side_sees_still_come_from_the_masks():
    comparison = Comparison(turn("KB-P-001", 2), turn("KB-M-001", 2, masked=["phone"]))
    assert comparison.only_left == ["전화번호"]
    assert comparison.only_right == []
