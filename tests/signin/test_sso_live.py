"""People sign in through the company's OpenID provider, in a real browser: chromium (Playwright)
against a live hyperbook whose local password login is switched off, and the npm `oidc-provider`
on loopback as the provider. An operator lands in the admin with the rights their groups give, an
auditor in the audit log, a planner on the consent page of an agent acting as their stakeholder;
a person the claims give nothing is refused on the login page, and so is the provider's own
refusal. Every sign-in and refusal is audited; no token the provider issued, nor the client
secret, appears in the database or the server's log."""

import re
import secrets
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from oauth2_provider.models import get_application_model

from audit.models import AuditEvent
from core.groups import ensure_default_groups
from signin.models import SsoIdentity, StakeholderLogin
from tests.browser import test_console_browser
from tests.browser.test_console_browser import ARTIFACTS
from tests.browser.test_operator_pages import db_read
from tests.live import free_port, live_server
from tests.mcpserver.conftest import TOOL
from tests.signin.company_idp import company_idp
from tests.signin.conftest import new_pkce
from tests.signin.test_sign_in_live import assert_nowhere_but_broker

pytestmark = [pytest.mark.db, pytest.mark.slow]

chromium = test_console_browser.browser  # a fixture: Debian's chromium, driven by Playwright

CLIENT_SECRET = "hyperbook-sso-client-secret-" + secrets.token_hex(8)
AGENT_REDIRECT = "http://127.0.0.1:9/callback"
ACCOUNTS = {
    "ops-kim": {
        "name": "김운영",
        "preferred_username": "ops-kim",
        "email": "ops.kim@corp.example",
        "groups": ["hb-operators"],
    },
    "audit-lee": {"name": "이감사", "email": "audit.lee@corp.example", "groups": ["hb-auditors"]},
    "planner-park": {
        "name": "박설계",
        "preferred_username": "planner-park",
        "stakeholder_id": "KB-P-002",
    },
    "visitor-choi": {"name": "최방문", "groups": ["sales"]},
}


@pytest.fixture(scope="module")
def sso_site(world, tmp_path_factory, django_db_blocker):
    folder = tmp_path_factory.mktemp("sso")
    server_port = free_port()
    callback = f"http://127.0.0.1:{server_port}/oidc/callback/"
    with django_db_blocker.unblock():
        ensure_default_groups()
        StakeholderLogin.objects.filter(stakeholder_id="KB-P-002").delete()
        # A local account with the provider's name for the operator: it must never be the one
        # signed in (people are found by issuer and subject, not by name).
        get_user_model().objects.filter(username="ops-kim").delete()
        get_user_model().objects.create_user("ops-kim", password="local-" + secrets.token_hex(8))
        out = folder / "client.json"
        with open(out, "w") as handle:
            call_command(
                "create_oauth_client",
                name="SSO test agent",
                redirect_uris=[AGENT_REDIRECT],
                stdout=handle,
            )
    client = {
        "client_id": "hyperbook",
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [callback],
    }
    idp_port = free_port()
    with company_idp(folder, port=idp_port, client=client, accounts=ACCOUNTS) as idp:
        env = {
            "LOCAL_LOGIN_ENABLED": "false",
            "OIDC_RP_CLIENT_ID": "hyperbook",
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_ADMIN_GROUPS": "hb-operators",
            "OIDC_AUDITOR_GROUPS": "hb-auditors",
        }
        endpoints = folder / "endpoints.env"
        with open(endpoints, "w") as handle:
            call_command("sso_endpoints", idp.issuer, stdout=handle)
        for line in endpoints.read_text().splitlines():
            name, value = line.split("=", 1)
            env[name] = value
        log = folder / "server.log"
        with live_server(log, env, port=server_port) as url:
            yield {"url": url, "idp": idp, "log": log, "env": env}


def sign_in_through_provider(page, login: str) -> None:
    """On the provider's pages: log in as `login` (the provider takes any password) and agree."""
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "provider-side-password")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]:has-text('Continue')")
    page.click("button[type=submit]")


def new_page(chromium, language="ko-KR"):
    context = chromium.new_context(locale=language, viewport={"width": 1280, "height": 900})
    # The provider's page imports a web font; there is no network beyond loopback.
    context.route(re.compile(r"^https://fonts\."), lambda route: route.abort())
    return context.new_page()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_an_operator_signs_in_to_the_admin_with_their_groups(sso_site, chromium, django_db_blocker):
    page = new_page(chromium)
    page.goto(f"{sso_site['url']}/admin/")
    assert "/admin/login/" in page.url
    assert page.locator("#login-form").count() == 0, "local password login is switched off"
    shot(page, "sso-admin-login-ko")
    page.click("#sso-sign-in a")
    sign_in_through_provider(page, "ops-kim")
    page.wait_for_url(f"{sso_site['url']}/admin/")
    assert page.locator("#site-name").count() == 1
    assert page.locator("a[href='/admin/registry/mcpserver/add/']").count() == 1, "may add servers"
    shot(page, "sso-admin-index-ko")

    def state():
        identity = SsoIdentity.objects.select_related("user").get(subject="ops-kim")
        user = identity.user
        return {
            "username": user.get_username(),
            "groups": sorted(user.groups.values_list("name", flat=True)),
            "staff": user.is_staff,
            "superuser": user.is_superuser,
            "usable_password": user.has_usable_password(),
            "issuer": identity.issuer,
            "signed_in": AuditEvent.objects.filter(
                action=AuditEvent.Action.SSO_SIGNED_IN, actor=user.get_username()
            ).count(),
        }

    seen = db_read(django_db_blocker, state)
    assert seen["username"] != "ops-kim", "the local account of that name was not taken over"
    assert seen["username"].startswith("ops-kim.sso-")
    assert seen["groups"] == ["mcp_admins"]
    assert seen["staff"] and not seen["superuser"] and not seen["usable_password"]
    assert seen["issuer"] == sso_site["idp"].issuer
    assert seen["signed_in"] == 1


def test_an_auditor_reads_the_audit_log_and_cannot_change_servers(
    sso_site, chromium, django_db_blocker
):
    page = new_page(chromium, "en-US")
    page.goto(f"{sso_site['url']}/admin/login/?next=/admin/audit/auditevent/")
    page.click("#sso-sign-in a")
    sign_in_through_provider(page, "audit-lee")
    page.wait_for_url(re.compile(r".*/admin/audit/auditevent/.*"))
    assert page.get_attribute("html", "lang") == "en"
    shot(page, "sso-auditor-audit-log-en")
    response = page.goto(f"{sso_site['url']}/admin/registry/mcpserver/add/")
    assert response.status == 403
    groups = db_read(
        django_db_blocker,
        lambda: sorted(
            SsoIdentity.objects.get(subject="audit-lee").user.groups.values_list("name", flat=True)
        ),
    )
    assert groups == ["auditors"]


def test_a_planner_signs_an_agent_in_as_their_stakeholder(sso_site, chromium, django_db_blocker):
    app = db_read(
        django_db_blocker, lambda: get_application_model().objects.get(name="SSO test agent")
    )
    pkce = new_pkce()
    query = {
        "response_type": "code",
        "client_id": app.client_id,
        "redirect_uri": AGENT_REDIRECT,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "state": "st-" + secrets.token_hex(4),
        "resource": f"{sso_site['url']}/mcp",
        "scope": TOOL,
    }
    page = new_page(chromium)
    page.goto(f"{sso_site['url']}/oauth/authorize/?{urlencode(query)}")
    assert "/oauth/login/" in page.url
    assert "SSO test agent" in page.text_content("#requesting-agent")
    page.click("#sso-sign-in a")
    sign_in_through_provider(page, "planner-park")
    page.wait_for_selector("#consent-form")
    assert "KB-P-002" in page.text_content("#acting-as")
    shot(page, "sso-consent-planner-ko")
    page.goto(f"{sso_site['url']}/oauth/agents/")
    assert page.locator("#content").count() == 1

    def link():
        login = StakeholderLogin.objects.select_related("user").get(stakeholder_id="KB-P-002")
        return login.user.get_username(), login.user.is_staff

    username, staff = db_read(django_db_blocker, link)
    assert username == "planner-park"
    assert not staff, "a stakeholder with no operator group is not staff"


def test_a_person_the_claims_give_nothing_is_refused_and_audited(
    sso_site, chromium, django_db_blocker
):
    page = new_page(chromium)
    page.goto(f"{sso_site['url']}/admin/")
    page.click("#sso-sign-in a")
    sign_in_through_provider(page, "visitor-choi")
    page.wait_for_selector(".messagelist .error")
    assert "/admin/login/" in page.url or "/oauth/login/" in page.url
    assert "권한" in page.text_content(".messagelist .error")
    shot(page, "sso-refused-ko")

    def seen():
        refusals = list(
            AuditEvent.objects.filter(action=AuditEvent.Action.SSO_REFUSED).values_list(
                "detail", flat=True
            )
        )
        return refusals, SsoIdentity.objects.filter(subject="visitor-choi").exists()

    refusals, identity = db_read(django_db_blocker, seen)
    assert "no_role" in refusals
    assert not identity, "a refused person gets no login"


def test_the_providers_own_refusal_returns_to_the_login_page(sso_site, chromium, django_db_blocker):
    page = new_page(chromium)
    page.goto(f"{sso_site['url']}/admin/")
    page.click("#sso-sign-in a")
    page.wait_for_selector("input[name=login]")
    # The provider's "cancel": its own abort link ends the interaction with access_denied.
    page.click("a:has-text('Cancel')")
    page.wait_for_selector(".messagelist .error")
    refusals = db_read(
        django_db_blocker,
        lambda: list(
            AuditEvent.objects.filter(action=AuditEvent.Action.SSO_REFUSED).values_list(
                "detail", flat=True
            )
        ),
    )
    assert any(detail.startswith("provider_error: access_denied") for detail in refusals)


def test_no_token_or_secret_is_kept(sso_site, django_db_blocker):
    tokens = sso_site["idp"].issued_tokens()
    assert tokens, "the provider issued tokens during this module"
    assert_nowhere_but_broker([*tokens, CLIENT_SECRET], [sso_site["log"]], django_db_blocker)
