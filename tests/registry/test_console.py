"""The admin discovery console against a real /mcp server process."""

import csv
import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from audit.models import AuditEvent
from registry.models import ConsoleTurn
from registry.presets import write_token_presets

pytestmark = [pytest.mark.db, pytest.mark.slow]

PROMPT = "담당 고객의 보험료 상세를 보여줘"


@pytest.fixture
def console(server, world, settings, tmp_path, django_db_blocker):
    presets = tmp_path / "presets.json"
    write_token_presets(presets, {k: world.tokens[k] for k in ("KB-P-001", "KB-M-001", "KB-P-099")})
    settings.VPD_TOKEN_PRESETS_FILE = presets
    settings.KB_MCP_BASE_URL = server.url
    with django_db_blocker.unblock():
        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        user, _ = User.objects.get_or_create(
            username="console-admin", is_staff=True, is_superuser=True
        )
        client = Client()
        client.force_login(user)
        yield client, user


def post(client, **data):
    payload = {
        "server": "kb_mcp",
        "stakeholder": "",
        "one_time_bearer": "",
        "prompt": "",
        "limit": "100",
        **data,
    }
    return client.post("/admin/registry/consoleturn/", payload)


def test_discovery_shows_version_session_tools_and_pin(console, django_db_blocker):
    client, _ = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-P-001", action="discover").content.decode()
    assert "2025-11-25" in body
    assert "stateless" in body
    assert "ords.query.kb_select_ai_vpd" in body


def test_two_stakeholders_see_different_rows_and_no_token_anywhere(
    console,
    world,
    django_db_blocker,
):
    client, user = console
    with django_db_blocker.unblock():
        planner = post(client, stakeholder="KB-P-001", prompt=PROMPT, action="call")
        manager = post(client, stakeholder="KB-M-001", prompt=PROMPT, action="call")
        turns = list(ConsoleTurn.objects.filter(user=user).values())
        events = list(AuditEvent.objects.filter(action__startswith="console.").values())
    planner_body, manager_body = planner.content.decode(), manager.content.decode()
    planner_rows = {r[0] for r in turns[1]["rendered"]["rows"]}
    manager_rows = {r[0] for r in turns[0]["rendered"]["rows"]}
    assert planner_rows and manager_rows and planner_rows != manager_rows
    assert "담당 고객" in planner_body  # the interpretation is shown
    for token in (world.tokens["KB-P-001"], world.tokens["KB-M-001"]):
        for text in (planner_body, manager_body, repr(turns), repr(events)):
            assert token not in text
    assert {t["stakeholder_id"] for t in turns} == {"KB-P-001", "KB-M-001"}
    assert all(t["token_prefix"] and t["token_fingerprint"] for t in turns)
    calls = [e for e in events if e["action"] == "console.call"]
    assert len(calls) >= 2
    assert {e["outcome"] for e in calls} == {"allowed"}
    assert all(e["http_status"] == 200 and e["row_count"] for e in calls)


def test_a_suspended_stakeholder_gets_the_korean_permission_message(console, django_db_blocker):
    client, _ = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-P-099", prompt=PROMPT, action="call").content.decode()
        event = AuditEvent.objects.filter(action="console.call").order_by("-sequence").first()
    assert "이 사용자에게 조회 권한 없음" in body
    assert (event.outcome, event.http_status) == ("forbidden", 403)


def test_a_forged_one_time_bearer_gets_the_korean_token_message(console, django_db_blocker):
    client, _ = console
    forged = "hbvpd_forged-console-token-0000000000"
    with django_db_blocker.unblock():
        body = post(client, one_time_bearer=forged, prompt=PROMPT, action="call").content.decode()
    assert "토큰이 유효하지 않거나 만료됨" in body
    assert forged not in body


def test_no_token_sends_nothing(console, django_db_blocker):
    client, user = console
    with django_db_blocker.unblock():
        before = AuditEvent.objects.count()
        body = post(client, prompt=PROMPT, action="call").content.decode()
        assert AuditEvent.objects.count() == before
    assert "토큰이 없습니다" in body


def test_a_preset_file_readable_by_others_is_refused(console, settings, django_db_blocker):
    client, _ = console
    settings.VPD_TOKEN_PRESETS_FILE.chmod(0o644)
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-P-001", prompt=PROMPT, action="call").content.decode()
    assert "chmod 600" in body


def test_history_is_per_user_and_deletable(console, django_db_blocker):
    client, user = console
    with django_db_blocker.unblock():
        post(client, stakeholder="KB-P-001", prompt=PROMPT, action="call")
        other = User.objects.create_user("other-admin", is_staff=True, is_superuser=True)
        other_client = Client()
        other_client.force_login(other)
        other_page = other_client.get("/admin/registry/consoleturn/").content.decode()
        assert PROMPT not in other_page
        client.post("/admin/registry/consoleturn/delete/")
        assert not ConsoleTurn.objects.filter(user=user).exists()


def test_masked_columns_are_marked_in_the_table(console, django_db_blocker):
    client, _ = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-M-001", prompt="담당 고객 목록", action="call")
    html = body.content.decode()
    # A branch manager sees phone numbers with the middle masked; the column says so.
    assert 'class="masked" data-column="phone"' in html
    assert "-****-" in html


def test_the_console_shows_the_words_used_and_a_refusal_that_names_the_words_it_could_not_use(
    console, django_db_blocker
):
    client, _ = console
    with django_db_blocker.unblock():
        answered = post(
            client, stakeholder="KB-P-001", prompt="VIP 고객 보여줘", action="call"
        ).content.decode()
        refused = post(
            client, stakeholder="KB-P-001", prompt="VIP 고객 보여줘 xyzzy", action="call"
        ).content.decode()
    assert 'id="understood"' in answered and "등급 VIP" in answered
    assert 'id="public-error"' in refused and "&#x27;xyzzy&#x27;" in refused
    assert 'id="answer"' not in refused  # no rows shown as if the question were understood


# --- answers people look at: a chart of the answer's own numbers, a CSV as shown, the time taken


def bars(body: str) -> dict[str, float]:
    chart = re.search(r'<div class="chart-frame" id="answer-chart">(.*?)</div>', body, re.S)
    assert chart, "no chart on the page"
    return {
        label: float(value)
        for label, value in re.findall(
            r'<rect class="bar [^"]*"[^>]* data-label="([^"]*)" data-series="[^"]*"'
            r' data-value="([-\d.]+)"',
            chart.group(1),
        )
    }


def asked(console, django_db_blocker, stakeholder: str, prompt: str):
    """(the page, the turn it shows) for one call through the console."""
    client, user = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder=stakeholder, prompt=prompt, action="call").content.decode()
        return body, ConsoleTurn.objects.filter(user=user).first()


def test_a_grouped_answer_is_drawn_as_bars_of_its_own_numbers(console, django_db_blocker):
    body, turn = asked(console, django_db_blocker, "KB-M-001", "상품별 계약 건수")
    columns = [c["name"] for c in turn.rendered["columns"]]
    hint = turn.rendered["chart"]
    assert hint["kind"] == "bar"
    assert hint["labels"] == ["product_code", "product_name"]
    # Bars are labelled by the product's name alone: its code says nothing to a reader.
    name_at, value_at = columns.index("product_name"), columns.index(hint["value"])
    expected = {str(row[name_at]): float(row[value_at]) for row in turn.rendered["rows"]}
    assert expected and bars(body) == expected
    assert re.search(r'<p id="took">[^<]*\d+ ms</p>', body)


def test_a_monthly_answer_is_a_line(console, django_db_blocker):
    body, turn = asked(console, django_db_blocker, "KB-P-001", "월별 보험료 합계")
    assert turn.rendered["chart"]["kind"] == "line", turn.rendered.get("interpretation")
    points = re.findall(r'<circle [^>]*data-label="([^"]+)" data-value="([\d.]+)"', body)
    assert points == sorted(points) and len(points) == len(turn.rendered["rows"])


def test_a_list_has_no_chart_but_scrolls_in_a_frame(console, django_db_blocker):
    client, _ = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-P-001", prompt="담당 고객 목록", action="call")
    body = body.content.decode()
    assert 'id="answer-chart"' not in body
    assert '<div class="answer-frame">' in body


def test_the_csv_is_the_answer_as_shown_masks_included_and_audited(console, django_db_blocker):
    client, user = console
    with django_db_blocker.unblock():
        post(client, stakeholder="KB-M-001", prompt="고객 전화번호 목록", action="call")
        turn = ConsoleTurn.objects.filter(user=user).first()
        response = client.get(f"/admin/registry/consoleturn/{turn.pk}/csv/")
        event = AuditEvent.objects.filter(action="console.answer_downloaded").latest("sequence")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = response.content.decode("utf-8")
    assert text.startswith("\ufeff")
    table = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    assert table[0] == [c["label"] for c in turn.rendered["columns"]]
    shown = [["" if cell is None else str(cell) for cell in row] for row in turn.rendered["rows"]]
    assert table[1:] == shown
    phone = [c["name"] for c in turn.rendered["columns"]].index("phone")
    assert all("****" in row[phone] for row in table[1:] if row[phone])  # still masked
    assert (event.actor, event.target, event.row_count) == (
        user.username,
        f"console_turn:{turn.pk}",
        len(shown),
    )


def test_discovery_shows_the_tools_description_and_input_schema(console, django_db_blocker):
    client, _ = console
    with django_db_blocker.unblock():
        body = post(client, stakeholder="KB-P-001", action="discover").content.decode()
    description = re.search(r'<p id="tool-description">(.*?)</p>', body, re.S).group(1)
    assert description.strip() not in ("", "—")
    schema = re.search(r'<details id="tool-schema">.*?<pre>(.*?)</pre>', body, re.S).group(1)
    assert "&quot;prompt&quot;" in schema and "&quot;limit&quot;" in schema


def test_compare_asks_one_question_as_two_stakeholders_side_by_side(
    console, world, django_db_blocker
):
    client, user = console
    with django_db_blocker.unblock():
        response = post(
            client, stakeholder="KB-P-001", compare_with="KB-M-001", prompt=PROMPT, action="compare"
        )
        turns = list(ConsoleTurn.objects.filter(user=user, prompt=PROMPT).order_by("created_at"))
        calls = AuditEvent.objects.filter(action="console.call", prompt_hash__gt="").count()
    body = response.content.decode()
    sides = re.findall(r'<section class="compare-side" data-stakeholder="([^"]+)"', body)
    assert sides == ["KB-P-001", "KB-M-001"]
    assert [turn.stakeholder_id for turn in turns[-2:]] == ["KB-P-001", "KB-M-001"]
    planner_rows, manager_rows = ({r[0] for r in t.rendered["rows"]} for t in turns[-2:])
    assert planner_rows and manager_rows and planner_rows != manager_rows
    assert calls >= 2
    for token in world.tokens.values():
        assert token not in body


def test_compare_needs_two_different_stakeholders_and_sends_nothing_otherwise(
    console, django_db_blocker
):
    client, user = console
    with django_db_blocker.unblock():
        before = ConsoleTurn.objects.filter(user=user).count()
        same = post(
            client, stakeholder="KB-P-001", compare_with="KB-P-001", prompt=PROMPT, action="compare"
        )
        after = ConsoleTurn.objects.filter(user=user).count()
    assert "서로 다른 두 관계자" in same.content.decode()
    assert before == after
