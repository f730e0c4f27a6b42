"""What an agent relays, as the official MCP Python SDK client receives it over HTTP: `content` is
a sentence with the figure, a small markdown table and the masked columns named, in the
question's language; `structuredContent` is the whole answer, valid against the outputSchema."""

import asyncio
import re

import pytest

from tests.kb.truth import BRANCHES, CONTRACTS, CUSTOMERS
from tests.mcpserver.test_sdk_client import list_and_call

pytestmark = [pytest.mark.db, pytest.mark.slow]

HANGUL = re.compile(r"[가-힣]")
GANGNAM = "BR-GN"


def call(server, world, stakeholder_id: str, prompt: str, limit: int = 50):
    _, tools, result = asyncio.run(
        list_and_call(server.mcp, world.tokens[stakeholder_id], prompt, limit)
    )
    assert tools.tools[0].output_schema  # the SDK checked structuredContent against it
    return result


def vip_of_gangnam() -> list[str]:
    return sorted(
        c["customer_id"]
        for c in CUSTOMERS.values()
        if c["branch_id"] == GANGNAM and c["grade"] == "VIP"
    )


def test_a_korean_list_is_a_sentence_a_table_and_the_masked_columns(server, world):
    result = call(server, world, "KB-M-001", "VIP 고객 목록")
    assert not result.is_error
    answer = result.structured_content
    text = result.content[0].text
    vip = vip_of_gangnam()
    assert [row["customer_id"] for row in answer["rows"]] == vip
    sentence, table, masked = text.split("\n\n")[:3]
    assert sentence == answer["interpretation"]["summary"]
    assert sentence.startswith(f"VIP 등급 고객 목록: {len(vip)}명입니다 (강남지점 기준, ")
    lines = table.splitlines()
    assert lines[0] == "| " + " | ".join(c["label"] for c in answer["columns"]) + " |"
    assert len(lines) == 2 + min(len(vip), 20)
    assert all(re.search(r"010-\*{4}-\d{4}", line) for line in lines[2:])  # phones masked
    assert masked == "가려진 열(이 사용자 권한): 전화번호."
    assert not text.lstrip().startswith("{")  # not a JSON dump


def test_an_english_count_says_its_figure_in_english(server, world):
    result = call(server, world, "KB-M-001", "How many VIP customers do I have?")
    assert not result.is_error
    answer = result.structured_content
    count = len(vip_of_gangnam())
    expected = f"Number of customers (grade VIP): {count} (branch 강남지점, as of 2026-06-30)."
    assert result.content[0].text == expected == answer["interpretation"]["summary"]
    assert [c["label"] for c in answer["columns"]] == ["count"]
    assert answer["rows"] == [{"count": count}]
    assert answer["interpretation"]["understood"] == [
        "customers",
        "grade VIP",
        "number of customers",
    ]


def test_an_english_list_glosses_coded_values_and_keeps_the_data(server, world):
    result = call(server, world, "KB-P-001", "unpaid premiums this month", limit=5)
    answer = result.structured_content
    text = result.content[0].text
    assert {row["status"] for row in answer["rows"]} == {"미납"}  # the data as stored
    assert "미납 (unpaid)" in text
    assert "payment status" in text.splitlines()[2]
    assert text.startswith("Unpaid premiums (2026-06): ")


def test_a_total_says_which_statuses_it_covers(server, world):
    gangnam = {c["customer_id"] for c in CUSTOMERS.values() if c["branch_id"] == GANGNAM}
    in_force = sum(
        int(k["monthly_premium"])
        for k in CONTRACTS.values()
        if k["customer_id"] in gangnam and k["status"] == "유지"
    )
    every = sum(
        int(k["monthly_premium"]) for k in CONTRACTS.values() if k["customer_id"] in gangnam
    )
    assert in_force < every
    korean = call(server, world, "KB-M-001", "월보험료 합계")
    assert korean.structured_content["rows"] == [{"total_monthly_premium": in_force}]
    assert f"{in_force:,}원" in korean.content[0].text
    assert "유지 계약만 셉니다" in korean.content[0].text
    english = call(server, world, "KB-M-001", "total monthly premium for all statuses")
    assert english.structured_content["rows"] == [{"total_monthly_premium": every}]
    assert f"KRW {every:,}" in english.content[0].text
    assert "every status" in english.content[0].text


def test_a_branch_outside_the_scope_is_said_without_its_rows(server, world):
    result = call(server, world, "KB-M-001", "종로지점 고객 목록")
    assert not result.is_error
    answer = result.structured_content
    assert answer["rows"] == []
    assert "종로지점은 조회 범위 밖입니다 (강남지점만)." in answer["interpretation"]["notes"]
    assert "종로지점은 조회 범위 밖입니다 (강남지점만)." in result.content[0].text
    jongno = sum(1 for c in CUSTOMERS.values() if c["branch_id"] == "BR-JR")
    assert str(jongno) not in result.content[0].text  # nothing about the branch's rows
    assert BRANCHES["BR-JR"]["branch_name"] == "종로지점"


@pytest.mark.parametrize(
    ("prompt", "english"), [("show me everything", True), ("오늘 서울 날씨 어때?", False)]
)
def test_an_unreadable_question_is_a_tool_error_in_its_language(server, world, prompt, english):
    result = call(server, world, "KB-P-001", prompt)
    assert result.is_error
    assert result.structured_content is None
    text = result.content[0].text
    if english:
        assert not HANGUL.search(text) and "Questions it can answer" in text
    else:
        assert "이렇게 물어보면 답할 수 있습니다" in text
