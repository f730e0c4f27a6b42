"""`manage.py kb_ask` against the live /mcp (a real server process), with a preset file."""

import io
import os
import re
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from core.tokens import token_fingerprint
from registry.presets import write_token_presets
from registry.tokens import display_prefix
from tests.live import ROOT, database_url_for_servers
from tests.registry.conftest import kb_declaration

pytestmark = [pytest.mark.db, pytest.mark.slow]

QUESTION = "담당 고객의 보험료 상세를 보여줘"
FORGED = "hbvpd_forged-token-that-was-never-issued-000"


@pytest.fixture
def kb_mcp(server, register):
    return register(kb_declaration("kb_mcp"))


@pytest.fixture
def presets(world, tmp_path):
    path = tmp_path / "vpd_token_presets.json"
    write_token_presets(path, {**world.tokens, "KB-X-FORGED": FORGED})
    return path


@pytest.fixture
def kb_ask(kb_mcp, presets, server, settings):
    """kb_ask(*args) -> what the command printed; a refusal raises CommandError."""
    settings.KB_MCP_BASE_URL = server.url
    settings.VPD_TOKEN_PRESETS_FILE = presets
    settings.POC3_MCP_TIMEOUT_SECONDS = 30

    def ask(*args) -> str:
        out = io.StringIO()
        call_command("kb_ask", *args, stdout=out)
        return out.getvalue()

    return ask


def last_console_event(stakeholder_id: str) -> AuditEvent:
    return (
        AuditEvent.objects.filter(action__startswith="console.", stakeholder_id=stakeholder_id)
        .order_by("-sequence")
        .first()
    )


def test_the_planner_gets_a_table_of_their_customers(kb_ask, world):
    out = kb_ask("--as", "KB-P-001", QUESTION)
    assert out.startswith("해석: ")
    assert "(customer_id)" in out  # id columns are shown, with their Korean labels
    shown = {c for c in world.visible_customers["KB-P-001"] if c in out}
    assert shown, out
    others = world.visible_customers["KB-M-001"] - world.visible_customers["KB-P-001"]
    assert not any(c in out for c in others)
    assert "request id" in out
    token = world.tokens["KB-P-001"]
    assert token not in out

    event = last_console_event("KB-P-001")
    assert (event.action, event.outcome, event.http_status) == ("console.call", "allowed", 200)
    assert (event.target, event.tool) == ("kb_mcp", "ords.query.kb_select_ai_vpd")
    assert event.stakeholder_role == "planner"
    assert event.token_prefix == display_prefix(token)
    assert event.token_fingerprint == token_fingerprint(token)
    assert event.row_count and event.row_count > 0
    assert event.prompt_length == len(QUESTION) and event.prompt_hash
    assert QUESTION not in str(event.changes) and token not in str(event.changes)
    # The server's own event for the same tools/call carries the same request id.
    assert AuditEvent.objects.filter(action="mcp.tools_call", request_id=event.request_id).exists()


def test_the_limit_is_passed_and_clamped(kb_ask):
    assert "limit 2 " in kb_ask("--as", "KB-M-001", "담당 고객 목록", "--limit", "2")
    assert last_console_event("KB-M-001").row_count <= 2


def test_with_language_code_en_it_speaks_english(kb_ask, settings):
    settings.LANGUAGE_CODE = "en"
    out = kb_ask("--as", "KB-P-001", "list my customers", "--limit", "3")
    assert out.startswith("Understood as: ")
    assert "Asked as: KB-P-001 (planner), as of " in out
    assert re.search(r"\n3 rows \(more\) · limit 3 ", out), out
    with pytest.raises(CommandError, match=r"^This user may not query \(HTTP 403\)"):
        kb_ask("--as", "KB-P-099", "list my customers")
    with pytest.raises(CommandError, match=r"^Enter a question\.$"):
        kb_ask("--as", "KB-P-001", " ")


def test_the_tools_refusal_is_in_the_questions_language_and_the_rest_in_language_code(
    kb_ask, settings
):
    settings.LANGUAGE_CODE = "en"
    with pytest.raises(CommandError) as refused:
        kb_ask("--as", "KB-H-001", "customers whose rrn starts with 87")
    assert str(refused.value).startswith("Tool error: Cannot filter on resident registration")
    with pytest.raises(CommandError) as refused:
        kb_ask("--as", "KB-H-001", "고객 전화번호 순으로")
    assert str(refused.value).startswith("Tool error: 전화번호(phone) 정렬은 처리할 수 없습니다")


def test_a_suspended_user_is_told_they_have_no_permission(kb_ask, world):
    with pytest.raises(CommandError, match="이 사용자에게 조회 권한 없음") as refused:
        kb_ask("--as", "KB-P-099", QUESTION)
    assert world.tokens["KB-P-099"] not in str(refused.value)
    event = last_console_event("KB-P-099")
    assert (event.outcome, event.http_status, event.detail) == ("forbidden", 403, "forbidden")


def test_a_forged_token_is_told_it_is_invalid_or_expired(kb_ask):
    with pytest.raises(CommandError, match="토큰이 유효하지 않거나 만료됨") as refused:
        kb_ask("--as", "KB-X-FORGED", QUESTION)
    assert FORGED not in str(refused.value)
    assert last_console_event("KB-X-FORGED").outcome == "unauthenticated"


def test_a_preset_file_others_can_read_is_refused_and_nothing_is_sent(kb_ask, presets):
    presets.chmod(0o644)
    before = AuditEvent.objects.filter(action__startswith="mcp.").count()
    with pytest.raises(CommandError, match="chmod 600"):
        kb_ask("--as", "KB-P-001", QUESTION)
    assert AuditEvent.objects.filter(action__startswith="mcp.").count() == before


def test_a_stakeholder_without_a_preset_is_refused_before_anything_is_sent(kb_ask):
    before = AuditEvent.objects.filter(action__startswith="mcp.").count()
    with pytest.raises(CommandError, match="이 관계자의 토큰 프리셋이 없습니다."):
        kb_ask("--as", "KB-P-404", QUESTION)
    assert AuditEvent.objects.filter(action__startswith="mcp.").count() == before
    refusal = AuditEvent.objects.filter(action="console.call").order_by("-sequence").first()
    assert (refusal.detail, refusal.outcome) == ("unknown_stakeholder", "error")


def test_without_kb_mcp_base_url_it_says_the_server_address_is_not_set(
    kb_ask, settings, monkeypatch
):
    settings.KB_MCP_BASE_URL = ""
    monkeypatch.delenv("KB_MCP_BASE_URL", raising=False)
    with pytest.raises(CommandError) as refused:
        kb_ask("--as", "KB-P-001", QUESTION)
    message = str(refused.value)
    assert "토큰을 보내지 않았습니다" in message
    assert "serving.json" in message and "KB_MCP_BASE_URL=http://127.0.0.1:PORT" in message
    refusal = AuditEvent.objects.filter(action="console.call").order_by("-sequence").first()
    assert refusal.detail == "kb_server_unknown"


def test_discover_lists_the_servers_tools(kb_ask):
    out = kb_ask("--as", "KB-H-001", "--discover")
    assert "프로토콜 버전: 2025-11-25" in out
    assert "ords.query.kb_select_ai_vpd" in out
    assert "세션 발급: 아니요" in out
    event = last_console_event("KB-H-001")
    assert (event.action, event.outcome, event.rpc_method) == (
        "console.discover",
        "allowed",
        "tools/list",
    )


def test_from_a_terminal_a_refusal_exits_non_zero_with_only_the_message(kb_mcp, presets, server):
    # A real process: the exit status and stderr are what a shell sees, which call_command hides.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
        "DATABASE_URL": database_url_for_servers(),
        "KB_MCP_BASE_URL": server.url,
        "VPD_TOKEN_PRESETS_FILE": str(presets),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "kb_ask", "--as", "KB-X-FORGED", QUESTION],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert "토큰이 유효하지 않거나 만료됨" in result.stderr
    assert FORGED not in result.stderr and "Traceback" not in result.stderr


def kb_ask_with_the_demo_settings(presets, var_dir, extra_env=None):
    """kb_ask as a shell on this machine runs it: the demo settings, no PORT or KB_MCP_BASE_URL."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PORT", "HOST", "KB_MCP_BASE_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="hyperbook.settings.local",
        DATABASE_URL=database_url_for_servers(),
        HYPERBOOK_VAR_DIR=str(var_dir),
        VPD_TOKEN_PRESETS_FILE=str(presets),
        **(extra_env or {}),
    )
    return subprocess.run(
        [sys.executable, "manage.py", "kb_ask", "--as", "KB-P-001", QUESTION],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_with_no_serving_record_and_no_base_url_no_token_is_sent_anywhere(
    kb_mcp, presets, tmp_path, world
):
    # Something else listening on the port the demo used to assume is told nothing.
    import socket

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", 8000))
    except OSError:
        listener.close()
        listener = None
    else:
        listener.listen()
        listener.settimeout(0.5)
    try:
        result = kb_ask_with_the_demo_settings(presets, tmp_path / "var")
        assert result.returncode == 1, result.stdout + result.stderr
        assert "토큰을 보내지 않았습니다" in result.stderr
        assert "KB_MCP_BASE_URL=http://127.0.0.1:PORT" in result.stderr
        assert world.tokens["KB-P-001"] not in result.stderr
        if listener is not None:
            with pytest.raises(TimeoutError):
                listener.accept()
    finally:
        if listener is not None:
            listener.close()


def test_kb_ask_asks_the_server_that_make_run_recorded(kb_mcp, presets, server, tmp_path, world):
    from core.serving import serving_record_write

    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o700)
    # The record names the live server and a process that is running (this test's).
    serving_record_write(var_dir, url=server.url, pid=os.getpid())
    result = kb_ask_with_the_demo_settings(presets, var_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KB-P-001" in result.stdout
