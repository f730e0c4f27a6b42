"""A real browser (Debian's chromium, driven by Playwright) uses the discovery console."""

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from conftest import service_missing
from registry.presets import write_token_presets
from tests.live import ROOT, live_server

pytestmark = [pytest.mark.db, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "test-artifacts"
PASSWORD = "browser-test-password-8c1f"  # noqa: S105  (a throwaway test login)
PROMPT = "담당 고객의 보험료 상세를 보여줘"


@pytest.fixture
def browser():
    if not Path(CHROMIUM).exists():
        service_missing("Debian's chromium is not installed (make test installs it as root)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def site(world, tmp_path, django_db_blocker, settings):
    presets = tmp_path / "presets.json"
    write_token_presets(presets, {k: world.tokens[k] for k in ("KB-P-001", "KB-M-001")})
    with django_db_blocker.unblock():
        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        if not User.objects.filter(username="browser-admin").exists():
            User.objects.create_superuser("browser-admin", password=PASSWORD)
    log = tmp_path / "server.log"
    env = {"VPD_TOKEN_PRESETS_FILE": str(presets), "MCP_RATE_LIMIT": "10000/minute"}
    with live_server(log, env) as url:
        yield url, log


def ask(page, stakeholder: str) -> list[str]:
    page.select_option("select[name=stakeholder]", stakeholder)
    page.fill("textarea[name=prompt]", PROMPT)
    page.fill("input[name=limit]", "100")
    page.click("#call")
    page.wait_for_selector("#answer tbody tr")
    return page.locator("#answer tbody tr td:first-child").all_inner_texts()


def test_an_admin_runs_discovery_and_calls_as_two_stakeholders(site, world, browser):
    url, log = site
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(locale="ko-KR")
    page.goto(f"{url}/admin/login/?next=/admin/registry/consoleturn/")
    page.fill("#id_username", "browser-admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#console-form")

    page.select_option("select[name=server]", "kb_mcp")
    page.select_option("select[name=stakeholder]", "KB-P-001")
    page.click("#discover")
    try:
        page.wait_for_selector("#result")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "console-failure.png"), full_page=True)
        (ARTIFACTS / "console-failure.html").write_text(page.content())
        raise
    page.screenshot(path=str(ARTIFACTS / "console-discovery.png"), full_page=True)
    assert "ords.query.kb_select_ai_vpd" in page.inner_text("#result")

    planner_rows = ask(page, "KB-P-001")
    planner_source = page.content()
    page.screenshot(path=str(ARTIFACTS / "console-planner-KB-P-001.png"), full_page=True)
    manager_rows = ask(page, "KB-M-001")
    manager_source = page.content()
    page.screenshot(path=str(ARTIFACTS / "console-manager-KB-M-001.png"), full_page=True)

    assert planner_rows and manager_rows
    assert set(planner_rows) != set(manager_rows)
    for token in world.tokens.values():
        assert token not in planner_source
        assert token not in manager_source
        assert token not in log.read_text(errors="replace")
    page.close()
