"""The tool's error messages are written in the question's language, whatever the server's."""

import re
from types import SimpleNamespace

import anyio
import pytest
from mcp import types

from kb.policy import StakeholderSnapshot
from mcpserver import server as mcp_server
from mcpserver.principals import Principal
from tests.mcpserver.conftest import TOOL

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def principal(stakeholder_id: str, role: str) -> Principal:
    """As the gate would pass it on, had the stakeholder been allowed when it looked."""
    return Principal(
        delegation_id=1,
        asker=StakeholderSnapshot(
            stakeholder_id=stakeholder_id, role=role, branch_id=None, status="active"
        ),
        tools=frozenset({TOOL}),
        display_prefix="hbvpd_test",
        fingerprint="0" * 64,
        permitted=True,
    )


@pytest.fixture
def ask(world, django_db_blocker):
    """ask(stakeholder_id, role, prompt) -> (is_error, text), through the server's own tool."""
    handler = mcp_server.build_server().get_request_handler("tools/call").handler

    def ask(stakeholder_id: str, role: str, prompt: str) -> tuple[bool, str]:
        state = {"principal": principal(stakeholder_id, role), "record": None}
        ctx = SimpleNamespace(request=SimpleNamespace(scope={"state": state}))
        params = types.CallToolRequestParams(name=TOOL, arguments={"prompt": prompt, "limit": 10})
        with django_db_blocker.unblock():
            result = anyio.run(handler, ctx, params)
        return bool(result.is_error), result.content[0].text

    return ask


def test_a_suspended_stakeholder_is_refused_in_the_questions_language(ask, settings):
    settings.LANGUAGE_CODE = "ko"
    is_error, text = ask("KB-P-099", "planner", "list my customers")
    assert is_error and text == "Suspended user: may not query"
    is_error, text = ask("KB-P-099", "planner", "담당 고객 목록")
    assert is_error and text == "정지된 사용자입니다: 조회 권한 없음"


def test_an_english_question_is_refused_in_english_even_on_a_korean_server(ask, settings):
    settings.LANGUAGE_CODE = "ko"
    is_error, text = ask("KB-H-001", "hq_analyst", "customers whose rrn starts with 87")
    assert is_error and not HANGUL.search(text), text
    assert "resident registration number (rrn)" in text and "Head-office analyst" in text


def test_a_korean_question_is_refused_in_korean_even_on_an_english_server(ask, settings):
    settings.LANGUAGE_CODE = "en"
    is_error, text = ask("KB-H-001", "hq_analyst", "고객 전화번호 순으로")
    assert is_error and "전화번호(phone)" in text and "본사 분석" in text


def test_an_unexpected_failure_is_reported_in_the_questions_language(ask, monkeypatch):
    async def broken(*args):
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(mcp_server, "_answer_in_db_thread", broken)
    _, english = ask("KB-P-001", "planner", "list my customers")
    _, korean = ask("KB-P-001", "planner", "담당 고객 목록")
    assert english == "The query failed (request id -)."
    assert korean == "조회 중 오류가 발생했습니다 (request id -)."
