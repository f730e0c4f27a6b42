"""The operators' and auditors' pages in a real browser (Debian's chromium, driven by Playwright),
as an admin and as an auditor, in Korean and in English: the console's chart against its answer,
the access page against the CSV files, the audit overview, the agent set-up page. Screenshots go
to test-artifacts/ (a token is masked out of every one)."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection

from core.groups import AUDITORS, MCP_ADMINS, ensure_default_groups
from registry.models import TokenDelegation
from registry.presets import write_token_presets
from tests.browser.test_console_browser import ARTIFACTS, PASSWORD, browser  # noqa: F401
from tests.kb.conftest import demo_rows, expected_customer_ids
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, call
from tests.registry.test_access_page import truth_counts

pytestmark = [pytest.mark.db, pytest.mark.slow]

LANGUAGES = {"ko": "ko-KR", "en": "en-US"}


@pytest.fixture(scope="module")
def pages_site(world, tmp_path_factory, django_db_blocker):
    from django.conf import settings

    folder = tmp_path_factory.mktemp("operator-pages")
    presets = folder / "presets.json"
    write_token_presets(presets, {k: world.tokens[k] for k in ("KB-P-001", "KB-M-001")})
    with django_db_blocker.unblock():
        ensure_default_groups()
        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        if not User.objects.filter(username="pages-admin").exists():
            User.objects.create_superuser("pages-admin", password=PASSWORD)
        if not User.objects.filter(username="pages-auditor").exists():
            auditor = User.objects.create_user("pages-auditor", password=PASSWORD, is_staff=True)
            auditor.groups.add(Group.objects.get(name=AUDITORS))
        if not User.objects.filter(username="pages-mcpadmin").exists():
            member = User.objects.create_user("pages-mcpadmin", password=PASSWORD, is_staff=True)
            member.groups.add(Group.objects.get(name=MCP_ADMINS))
    env = {"VPD_TOKEN_PRESETS_FILE": str(presets), "MCP_RATE_LIMIT": "10000/minute"}
    with live_server(folder / "server.log", env) as url:
        yield url


def logged_in(browser, url: str, username: str, language: str, path: str):  # noqa: F811
    """A page logged in as `username`, its browser speaking `language`, opened at `path`."""
    page = browser.new_page(locale=LANGUAGES[language], viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/admin/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#content")
    assert page.get_attribute("html", "lang") == language, "the admin follows the browser"
    return page


def filled(page, fields: dict[str, str]) -> None:
    """Fill the form's fields by name: a choice for a select, text for anything else."""
    for name, value in fields.items():
        field = page.locator(f"[name={name}]")
        if field.evaluate("element => element.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)


def db_read(django_db_blocker, read):
    """Run `read` against the database from another thread (Playwright's sync API keeps an event
    loop in this one)."""

    def run():
        with django_db_blocker.unblock():
            try:
                return read()
            finally:
                connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result(timeout=30)


def shot(page, name: str, mask=()):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(
        path=str(ARTIFACTS / f"{name}.png"),
        full_page=True,
        mask=[page.locator(selector) for selector in mask],
    )


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-auditor"])
def test_the_access_page_counts_what_the_csv_files_say(pages_site, browser, username, language):  # noqa: F811
    page = logged_in(
        browser, pages_site, username, language, "/admin/registry/tokendelegation/access/KB-M-001/"
    )
    counts = tuple(
        int(t.replace(",", "")) for t in page.locator("#access-counts td.count").all_inner_texts()
    )
    assert counts == truth_counts()["KB-M-001"]
    masked = page.locator("#access-masked tr[data-column]")
    assert {masked.nth(i).get_attribute("data-column") for i in range(masked.count())} == {
        "phone",
        "rrn",
    }
    page.fill("#record", "C0001")
    page.click("#record ~ input[type=submit]")
    page.wait_for_selector("#access-visibility")
    assert page.get_attribute("#access-visibility", "data-visible") == "yes"
    assert page.locator("#access-visibility").is_visible()
    shot(page, f"access-{username}-{language}")

    # And the answer "no" is shown too (the admin's CSS hides a `.hidden` element outright).
    unseen = sorted(
        {row["customer_id"] for row in demo_rows("customers")} - expected_customer_ids("KB-M-001")
    )[0]
    page.fill("#record", unseen)
    page.click("#record ~ input[type=submit]")
    page.wait_for_selector(f"#access-visibility:has-text('{unseen}')")
    answer = page.locator("#access-visibility")
    assert answer.get_attribute("data-visible") == "no"
    assert answer.is_visible() and answer.bounding_box()["height"] > 0
    assert unseen in answer.inner_text()
    shot(page, f"access-refused-{username}-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-auditor"])
def test_the_audit_overview_draws_its_counts(pages_site, browser, username, language):  # noqa: F811
    page = logged_in(browser, pages_site, username, language, "/admin/audit/auditevent/overview/")
    page.wait_for_selector("#overview-hours")
    listed = {
        link.get_attribute("href"): int(link.get_attribute("data-value"))
        for link in page.locator("#overview-outcomes a").all()
    }
    drawn = [
        int(v)
        for v in page.locator("#overview-hours rect.bar[data-value]").evaluate_all(
            "bars => bars.map(b => b.dataset.value)"
        )
    ]
    assert sum(drawn) == sum(listed.values()) > 0
    shot(page, f"overview-{username}-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_the_console_draws_a_grouped_answer_as_bars_of_its_numbers(pages_site, browser, language):  # noqa: F811
    page = logged_in(browser, pages_site, "pages-admin", language, "/admin/registry/consoleturn/")
    page.select_option("select[name=server]", "kb_mcp")
    filled(page, {"stakeholder": "KB-M-001", "prompt": "상품별 계약 건수"})
    page.click("#call")
    page.wait_for_selector("#answer-chart svg")
    headers = page.locator("#answer thead th").evaluate_all("ths => ths.map(t => t.dataset.column)")
    rows = page.locator("#answer tbody tr").evaluate_all(
        "trs => trs.map(tr => [...tr.children].map(td => td.textContent))"
    )
    value_at = next(i for i, name in enumerate(headers) if name.endswith("count") or name == "n")
    # Cells read as figures ("1,234"; amounts "32,000원"): the bars carry the plain numbers.
    expected = sorted(float(row[value_at].replace(",", "").removesuffix("원")) for row in rows)
    bars = page.locator("#answer-chart rect.bar").evaluate_all(
        "bars => bars.map(b => [Number(b.dataset.value), Number(b.getAttribute('height'))])"
    )
    assert sorted(value for value, _ in bars) == expected
    # Heights follow the values: the tallest bar is the largest count.
    assert max(bars, key=lambda bar: bar[1])[0] == max(expected)
    assert re.search(r"\d+ ms", page.inner_text("#took"))
    shot(page, f"console-chart-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_the_agent_set_up_page_has_a_copy_button_for_each_client(pages_site, browser, language):  # noqa: F811
    page = logged_in(
        browser, pages_site, "pages-admin", language, "/admin/registry/tokendelegation/add/"
    )
    filled(page, {"stakeholder": "KB-P-001", "agent_name": f"browser {language}"})
    page.click("input[type=submit]")
    page.wait_for_selector("#setup-vscode")
    token = page.inner_text("#issued-token").strip()
    assert token in page.inner_text("#setup-inspector")
    # VS Code's file asks for the token; the embedded form waits behind its warning, folded.
    assert token not in page.inner_text("#setup-vscode")
    assert "promptString" in page.inner_text("#setup-vscode")
    assert not page.locator("#setup-vscode-embedded").is_visible()
    page.click("#embedded-vscode summary")
    assert page.locator("#setup-vscode-embedded").is_visible()
    assert token in page.inner_text("#setup-vscode-embedded")
    assert page.locator("button[data-copy^=setup-]:visible").count() == 4
    secret = [
        "#issued-token",
        "#setup-vscode-embedded",
        "#setup-claude",
        "#setup-inspector",
    ]
    shot(page, f"agent-setup-{language}", mask=secret)
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-mcpadmin"])
def test_a_reload_or_a_back_navigation_neither_shows_nor_issues_the_token_again(
    pages_site,
    browser,  # noqa: F811
    django_db_blocker,
    username,
    language,
):
    agent = f"reload {username} {language}"
    page = logged_in(
        browser, pages_site, username, language, "/admin/registry/tokendelegation/add/"
    )
    filled(page, {"stakeholder": "KB-P-001", "agent_name": agent})
    page.click("input[type=submit]")
    page.wait_for_selector("#issued-token")
    token = page.inner_text("#issued-token").strip()
    issued_at = page.url
    assert "/issued/" in issued_at

    def issued() -> int:
        return db_read(django_db_blocker, TokenDelegation.objects.filter(agent_name=agent).count)

    assert issued() == 1
    response = page.reload()
    assert response.status == 410
    assert token not in page.content()
    assert page.locator("#token-gone").is_visible()
    shot(page, f"token-gone-{username}-{language}")
    page.go_back()
    page.wait_for_selector("#content")
    assert token not in page.content()
    page.go_forward()
    page.wait_for_selector("#content")
    assert token not in page.content()
    assert page.url == issued_at
    assert issued() == 1, "navigating issued another token"
    page.close()


@pytest.mark.parametrize(
    "path", ["/admin/registry/consoleturn/", "/admin/registry/tokendelegation/add/"]
)
def test_an_auditor_is_kept_out_of_the_console_and_the_token_issue_page(pages_site, browser, path):  # noqa: F811
    page = logged_in(browser, pages_site, "pages-auditor", "en", "/admin/")
    response = page.goto(f"{pages_site}{path}")
    assert response.status == 403
    assert "setup-vscode" not in page.content() and "console-form" not in page.content()
    page.close()


USERS = ["pages-admin", "pages-mcpadmin", "pages-auditor"]
SCREENSHOTS = ARTIFACTS.parent / "docs" / "screenshots"


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", USERS)
def test_the_dashboard_shows_figures_that_lead_to_their_lists(
    pages_site,
    browser,  # noqa: F811
    username,
    language,
):
    page = logged_in(browser, pages_site, username, language, "/admin/")
    assert page.locator("#site-name").inner_text().strip() == "hyperbook"
    figures = page.locator("#dashboard li.dashboard-figure")
    assert figures.count() >= 4
    keys = figures.evaluate_all("items => items.map(i => i.dataset.figure)")
    assert {"calls", "refusals", "expiring", "delivery", "checkpoint"} <= set(keys)
    assert page.locator("#dashboard-servers tr[data-server=kb_mcp]").is_visible()
    shot(page, f"dashboard-{username}-{language}")
    if username == "pages-admin":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"dashboard-{language}.png"), full_page=True)
    calls = int(page.inner_text("li[data-figure=calls] .figure-value").replace(",", ""))
    page.click("li[data-figure=calls] a")
    page.wait_for_selector("#changelist")
    assert "range=today" in page.url
    if calls:
        assert page.locator("#result_list tbody tr").count() == min(calls, 50)
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-mcpadmin"])
def test_compare_shows_two_stakeholders_answers_side_by_side(
    pages_site,
    browser,  # noqa: F811
    username,
    language,
):
    page = logged_in(browser, pages_site, username, language, "/admin/registry/consoleturn/")
    page.select_option("select[name=server]", "kb_mcp")
    page.select_option("select[name=stakeholder]", "KB-P-001")
    page.select_option("select[name=compare_with]", "KB-M-001")
    page.fill("textarea[name=prompt]", "상품별 계약 건수")
    page.fill("input[name=limit]", "100")
    page.click("#compare")
    page.wait_for_selector("#comparison")
    sides = page.locator(".compare-side")
    assert sides.evaluate_all("s => s.map(x => x.dataset.stakeholder)") == ["KB-P-001", "KB-M-001"]
    # The planner counts their own contracts, the branch manager the branch's: more of them.
    left, right = (
        sum(
            int(cells[-1].replace(",", ""))
            for cells in sides.nth(i)
            .locator("tbody tr")
            .evaluate_all("trs => trs.map(tr => [...tr.children].map(td => td.textContent))")
        )
        for i in (0, 1)
    )
    assert 0 < left < right
    # Side by side: the two answers share a row of the page.
    boxes = [sides.nth(i).bounding_box() for i in (0, 1)]
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 5 and boxes[0]["x"] < boxes[1]["x"]
    # docs/screenshots/compare-*.png are test_compare_browser.py's (a customer list, masking).
    shot(page, f"compare-{username}-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", USERS)
def test_server_health_and_check_now(pages_site, browser, username, language):  # noqa: F811
    page = logged_in(browser, pages_site, username, language, "/admin/registry/mcpserver/")
    page.click("text=kb_mcp")
    page.wait_for_selector("#server-health")
    button = page.locator("#check-now")
    if username == "pages-auditor":
        assert button.count() == 0
    else:
        button.click()
        page.wait_for_selector("#server-health")
        assert page.locator("#server-health").inner_text().count("ms") >= 1
        page.goto(f"{pages_site}/admin/registry/mcpserver/")
        health = page.locator("tr:has-text('kb_mcp') .server-health")
        assert health.get_attribute("data-ok") == "yes"
    shot(page, f"server-health-{username}-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", USERS)
def test_the_event_list_searches_exports_and_links(
    pages_site,
    world,
    browser,  # noqa: F811
    username,
    language,
):
    ask(pages_site, world, "담당 고객 목록")  # at least one tool call to find and export
    page = logged_in(browser, pages_site, username, language, "/admin/audit/auditevent/")
    assert "보기위한" not in page.inner_text("h1")
    page.fill("#searchbar", "mcp.tools_call")
    page.press("#searchbar", "Enter")
    page.wait_for_selector("#changelist")
    with page.expect_download() as download:
        page.click("#export-jsonl")
    text = open(download.value.path(), encoding="utf-8").read()
    # A filtered list is each of its events proven on its own: a proof bundle.
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "hyperbook.audit_proof"
    assert lines[1:] and {line["event"]["action"] for line in lines[1:]} == {"mcp.tools_call"}
    if page.locator("#result_list tbody tr").count():
        page.locator("#result_list tbody tr th a").first.click()
        page.wait_for_selector("#content")
        if page.locator("#event-same-request").count():
            page.click("#event-same-request")
            page.wait_for_selector("#changelist")
    shot(page, f"events-{username}-{language}")
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-mcpadmin"])
def test_renewing_shows_the_successors_token_once(
    pages_site,
    browser,  # noqa: F811
    django_db_blocker,
    username,
    language,
):
    page = logged_in(
        browser, pages_site, username, language, "/admin/registry/tokendelegation/add/"
    )
    filled(page, {"stakeholder": "KB-P-001", "agent_name": f"renew {username} {language}"})
    page.click("input[type=submit]")
    page.wait_for_selector("#issued-token")
    page.click("#token-once ~ .agent-setup a[href$='/change/']")
    page.wait_for_selector("#renew")
    page.click("#renew")
    page.wait_for_selector("input[name=expires_at]")
    assert page.get_attribute("input[name=expires_at]", "type") == "datetime-local"
    page.click("input[type=submit]")
    page.wait_for_selector("#issued-token")
    shot(
        page,
        f"renewed-{username}-{language}",
        mask=["#issued-token", "#setup-vscode-embedded", "#setup-claude", "#setup-inspector"],
    )
    page.reload()
    assert page.locator("#token-gone").is_visible()
    page.close()


@pytest.mark.parametrize("language", list(LANGUAGES))
@pytest.mark.parametrize("username", ["pages-admin", "pages-mcpadmin"])
def test_bulk_revoking_asks_one_reason_beside_its_field_and_audits_each(
    pages_site,
    browser,  # noqa: F811
    django_db_blocker,
    username,
    language,
):
    from datetime import timedelta

    from django.utils import timezone

    from audit.models import AuditEvent
    from kb.models import Stakeholder
    from registry.delegations import delegation_issue

    agent = f"bulk {username} {language}"

    def issue_two():
        planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
        expires = timezone.now() + timedelta(days=3)
        for _ in range(2):
            delegation_issue(stakeholder=planner, agent_name=agent, expires_at=expires)

    db_read(django_db_blocker, issue_two)
    page = logged_in(browser, pages_site, username, language, "/admin/registry/tokendelegation/")
    page.fill("#searchbar", agent)
    page.press("#searchbar", "Enter")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 2
    page.check("#action-toggle")
    page.select_option("select[name=action]", "revoke_selected")
    page.click("button[name=index]")
    page.wait_for_selector("#revoke-selected-list")
    assert page.locator("#revoke-selected-list li").count() == 2

    # A blank reason (spaces pass the browser's own check) is refused beside the field.
    page.fill("[name=reason]", "   ")
    page.click("input[type=submit]")
    page.wait_for_selector("#revoke-selected-list")
    assert page.locator(".form-row .errorlist").count() == 1
    revoked = lambda: TokenDelegation.objects.filter(  # noqa: E731
        agent_name=agent, revoked_at__isnull=False
    ).count()
    assert db_read(django_db_blocker, revoked) == 0

    page.fill("[name=reason]", f"lost laptop {language}")
    page.click("input[type=submit]")
    page.wait_for_selector("#result_list")
    assert page.locator(".messagelist .success").count() == 1
    shot(page, f"bulk-revoked-{username}-{language}")
    page.close()

    def outcome():
        rows = TokenDelegation.objects.filter(agent_name=agent)
        events = AuditEvent.objects.filter(
            action=AuditEvent.Action.DELEGATION_REVOKED,
            target__in=[f"delegation:{pk}" for pk in rows.values_list("pk", flat=True)],
        )
        return (
            sorted(rows.values_list("revoked_reason", flat=True)),
            sorted(events.values_list("actor", flat=True)),
        )

    reasons, actors = db_read(django_db_blocker, outcome)
    assert reasons == [f"lost laptop {language}"] * 2
    assert actors == [username] * 2


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_an_auditor_is_offered_no_revoking(pages_site, browser, language):  # noqa: F811
    page = logged_in(
        browser, pages_site, "pages-auditor", language, "/admin/registry/tokendelegation/"
    )
    page.wait_for_selector("#result_list")  # auditors see the delegations, and cannot end them
    assert page.locator("select[name=action] option[value=revoke_selected]").count() == 0
    page.close()


REFUSED_LABELS = {"ko": "질문 거부", "en": "Question refused"}


def ask(url: str, world, prompt: str) -> httpx.Response:
    """The tool asked as KB-P-001, straight over /mcp."""
    return httpx.post(
        f"{url}/mcp",
        json=call(prompt),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {world.tokens['KB-P-001']}"},
        timeout=60,
    )


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_a_refused_question_reads_as_refused_to_an_auditor(pages_site, world, browser, language):  # noqa: F811
    asked = ask(pages_site, world, "고객들의 청구 내역")
    assert asked.json()["result"]["isError"], "the tool refuses a question about claims"
    request_id = asked.headers["x-request-id"]
    page = logged_in(browser, pages_site, "pages-auditor", language, "/admin/")
    refusals = int(page.inner_text("li[data-figure=refusals] .figure-value").replace(",", ""))
    assert refusals >= 1, "the dashboard counts it as refused"
    page.click("li[data-figure=refusals] a")
    page.wait_for_selector("#changelist")
    row = page.locator("#result_list tbody tr", has_text=request_id)
    assert row.count() == 1, "the refused filter lists it"
    assert REFUSED_LABELS[language] in row.inner_text()
    row.locator("th a").click()
    page.wait_for_selector("#content")
    body = page.inner_text("#content")
    assert (
        REFUSED_LABELS[language] in body
        and "out_of_data" not in body.split(REFUSED_LABELS[language])[0]
    )
    shot(page, f"refused-question-auditor-{language}")
    page.close()
