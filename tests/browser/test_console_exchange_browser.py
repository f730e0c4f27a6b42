"""In a real browser: the console's raw JSON-RPC view opens, and its exchange link lists exactly
the exchange's audit events, for an mcp_admins member and (from the audit log) for an auditor."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from audit.models import AuditEvent
from core.groups import AUDITORS, MCP_ADMINS, ensure_default_groups
from registry.models import ConsoleTurn
from registry.presets import write_token_presets
from tests.browser.test_console_browser import PASSWORD, PROMPT, browser  # noqa: F401
from tests.browser.test_operator_pages import db_read, logged_in, shot
from tests.live import live_server

pytestmark = [pytest.mark.db, pytest.mark.slow]

ADMIN, AUDITOR = "exchange-mcpadmin", "exchange-auditor"


@pytest.fixture(scope="module")
def exchange_site(world, tmp_path_factory, django_db_blocker):
    from django.conf import settings

    folder = tmp_path_factory.mktemp("console-exchange")
    presets = folder / "presets.json"
    write_token_presets(presets, {"KB-P-001": world.tokens["KB-P-001"]})
    with django_db_blocker.unblock():
        ensure_default_groups()
        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        for username, group in ((ADMIN, MCP_ADMINS), (AUDITOR, AUDITORS)):
            if not User.objects.filter(username=username).exists():
                user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
                user.groups.add(Group.objects.get(name=group))
    env = {"VPD_TOKEN_PRESETS_FILE": str(presets), "MCP_RATE_LIMIT": "10000/minute"}
    with live_server(folder / "server.log", env) as url:
        yield url


def listed_events(page) -> set[str]:
    links = page.locator("#result_list a[href*='/admin/audit/auditevent/']").evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"
    )
    return {m.group(1) for href in links if (m := re.search(r"/([0-9a-f-]{36})/change/", href))}


def exchange_event_ids(django_db_blocker, exchange_id: str) -> set[str]:
    events = AuditEvent.objects.filter(client_request_id=exchange_id)
    pks = events.values_list("pk", flat=True)
    return db_read(django_db_blocker, lambda: {str(pk) for pk in pks})


def latest_exchange() -> tuple[ConsoleTurn, AuditEvent]:
    turn = ConsoleTurn.objects.exclude(exchange_id="").latest("created_at")
    own = AuditEvent.objects.get(client_request_id=turn.exchange_id, action__startswith="console.")
    return turn, own


def test_an_mcp_admin_opens_the_raw_view_and_follows_the_exchange_to_its_events(
    exchange_site,
    world,
    browser,  # noqa: F811
    django_db_blocker,
):
    page = logged_in(browser, exchange_site, ADMIN, "ko", "/admin/registry/consoleturn/")
    page.select_option("select[name=stakeholder]", "KB-P-001")
    page.fill("textarea[name=prompt]", PROMPT)
    page.click("#call")
    page.wait_for_selector("#answer tbody tr")

    raw = page.locator("#raw-jsonrpc")
    assert raw.get_attribute("open") is None
    assert not page.locator("#raw-jsonrpc pre").first.is_visible()
    page.click("#raw-jsonrpc summary")
    assert raw.get_attribute("open") is not None
    assert page.locator("#raw-jsonrpc pre").first.is_visible()
    assert "원본 JSON-RPC 보기" in page.inner_text("#raw-jsonrpc summary")
    shown = raw.inner_text()
    assert '"method": "tools/call"' in shown and PROMPT in shown
    shot(page, "console-raw-jsonrpc", mask=["#exchange-id"])
    for token in world.tokens.values():
        assert token not in page.content()

    exchange_id = page.inner_text("#exchange-id")
    page.click("#exchange-events")
    page.wait_for_selector("#result_list")
    expected = exchange_event_ids(django_db_blocker, exchange_id)
    assert len(expected) == 5  # initialize, initialized, tools/list, tools/call, console.call
    assert listed_events(page) == expected
    page.close()


def test_an_auditor_cannot_use_the_console_but_follows_an_exchange_from_its_event_in_english(
    exchange_site,
    browser,  # noqa: F811
    django_db_blocker,
):
    turn, own = db_read(django_db_blocker, latest_exchange)
    page = logged_in(
        browser, exchange_site, AUDITOR, "en", f"/admin/audit/auditevent/{own.pk}/change/"
    )
    link = page.locator("#event-exchange")
    assert link.text_content() == "Events of this exchange"  # shown in capitals
    link.click()
    page.wait_for_selector("#result_list")
    assert listed_events(page) == exchange_event_ids(django_db_blocker, turn.exchange_id)

    console = page.goto(f"{exchange_site}/admin/registry/consoleturn/")
    assert console is not None and console.status == 403  # using the console sends a bearer
    turn_page = page.goto(f"{exchange_site}/admin/registry/consoleturn/{turn.pk}/change/")
    assert turn_page is not None and turn_page.status in (302, 403, 404)
    page.close()


def test_the_turn_page_from_the_history_shows_the_same_raw_view(
    exchange_site,
    browser,  # noqa: F811
):
    page = logged_in(browser, exchange_site, ADMIN, "en", "/admin/registry/consoleturn/")
    page.click("#history a.turn-link >> nth=0")
    page.wait_for_selector("#raw-jsonrpc")
    assert page.inner_text("#raw-jsonrpc summary") == "Show the raw JSON-RPC"
    page.click("#raw-jsonrpc summary")
    assert '"method": "initialize"' in page.inner_text("#raw-jsonrpc")
    assert page.locator("#exchange-events").is_visible()
    page.close()
