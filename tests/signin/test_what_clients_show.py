"""What an agent and its user are shown: a registration refused with what to do instead, the
login page naming the agent that asks, dates in the page's language, pages that are never cached,
the agents page's one message and its way back, and a client first seen through its metadata
document audited once."""

import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.utils import formats, timezone, translation
from oauth2_provider.models import get_application_model

from audit.models import AuditEvent
from registry.models import TokenDelegation
from tests.signin import test_client_metadata as documents
from tests.signin.conftest import authorize_params, consent_form, new_pkce, sign_in
from tests.signin.test_client_metadata import Client, document_server, good_document

pytestmark = pytest.mark.django_db

# The metadata documents' fixtures: a loopback HTTPS server's certificate, and the settings that
# trust it.
tls_files, cimd = documents.tls_files, documents.cimd

REGISTRATION = {"redirect_uris": ["http://127.0.0.1:9999/cb"], "token_endpoint_auth_method": "none"}


# --- registration (RFC 7591) while it is off --------------------------------------------------


@pytest.mark.parametrize("path", ["/register", "/oauth/register/"])
def test_a_registration_while_it_is_off_says_how_to_get_a_client(client, path):
    """The MCP SDKs register when they hold no client, at /register when the metadata names no
    endpoint: they show this body to their user."""
    response = client.post(path, json.dumps(REGISTRATION), content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["error"] == "invalid_client_metadata"
    assert "manage.py create_oauth_client" in body["error_description"]
    assert "OAUTH_DCR_ENABLED" in body["error_description"]
    assert body["error_description"].isascii()  # RFC 7591: ASCII error descriptions
    assert not get_application_model().objects.exists()


def test_registration_at_the_sdk_fallback_path_works_once_enabled(client, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": True}
    response = client.post("/register", json.dumps(REGISTRATION), content_type="application/json")
    assert response.status_code == 201, response.content
    application = get_application_model().objects.get(client_id=response.json()["client_id"])
    # A client that registered itself is audited once, as it is created.
    created = AuditEvent.objects.get(action=AuditEvent.Action.OAUTH_CLIENT_CREATED)
    assert created.target == f"oauth_client:{application.pk}"
    assert created.changes["after"]["registration_source"] == "dcr"


# --- the login page ---------------------------------------------------------------------------


def login_page(client, client_id: str, **headers):
    params = {"client_id": client_id, "response_type": "code", "state": "s"}
    next_url = f"/oauth/authorize/?{urlencode(params)}"
    return client.get("/oauth/login/", {"next": next_url}, **headers)


def test_the_login_page_names_the_agent_that_asks_escaped(client, client_app):
    client_app.name = "<img src=x onerror=alert(1)> agent"
    client_app.save()
    page = login_page(client, client_app.client_id)
    text = page.content.decode()
    assert page.status_code == 200
    assert 'id="requesting-agent"' in text
    assert "&lt;img src=x onerror=alert(1)&gt; agent" in text
    assert "<img src=x" not in text
    assert "이 사용자로 연결하려고 합니다" in text
    assert 'id="requesting-agent-unverified"' not in text  # registered in advance

    english = login_page(client, client_app.client_id, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "asks to connect as this user" in english


def test_the_login_page_names_a_metadata_document_client_by_its_host_before_it_is_fetched(
    client,
):
    text = login_page(client, "https://agent.example/client.json").content.decode()
    assert "<strong>agent.example</strong>" in text
    assert 'id="requesting-agent-unverified"' in text


def test_a_plain_login_names_no_agent(client):
    text = client.get("/oauth/login/").content.decode()
    assert 'id="requesting-agent"' not in text
    off_site = client.get("/oauth/login/", {"next": "https://evil.example/oauth/authorize/"})
    assert 'id="requesting-agent"' not in off_site.content.decode()


def test_the_login_and_consent_pages_are_never_stored(client, client_app, planner):
    assert "no-store" in login_page(client, client_app.client_id)["Cache-Control"]
    client.force_login(planner)
    consent = client.get("/oauth/authorize/", authorize_params(client_app, new_pkce()))
    assert consent.status_code == 200
    assert "no-store" in consent["Cache-Control"]
    # An error page of the flow too.
    refused = client.get(
        "/oauth/authorize/", authorize_params(client_app, new_pkce(), resource="https://x/mcp")
    )
    assert "no-store" in refused["Cache-Control"]


# --- consent dates follow the page's language ---------------------------------------------------


@pytest.mark.parametrize("language", ["ko", "en"])
def test_consent_dates_are_in_the_pages_language(client, client_app, planner, settings, language):
    client.force_login(planner)
    page = client.get(
        "/oauth/authorize/",
        authorize_params(client_app, new_pkce()),
        HTTP_ACCEPT_LANGUAGE=language,
    )
    text = page.content.decode()
    latest = timezone.localdate() + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS)
    with translation.override(language):
        expected = formats.date_format(latest)
    assert expected in text
    if language == "ko":
        assert f"{latest.year}년 {latest.month}월 {latest.day}일" in text
    else:
        assert f"{latest.year}년" not in text and str(latest.year) in expected
    # No browser date picker, which would show the browser's own order whatever the page's.
    assert 'type="date"' not in text
    assert f'value="{page.context["form"].initial["expires_on"].isoformat()}"' in text


def test_a_day_out_of_range_is_refused_in_the_pages_language(client, client_app, planner):
    client.force_login(planner)
    page = client.get("/oauth/authorize/", authorize_params(client_app, new_pkce()))
    data = consent_form(page) | {"allow": "true", "expires_on": "2999-01-01"}
    refused = client.post("/oauth/authorize/", data).content.decode()
    latest = page.context["form"].latest_day
    assert f"{latest.year}년 {latest.month}월 {latest.day}일" in refused


# --- the agents page ----------------------------------------------------------------------------


def test_a_revoke_says_so_once_and_the_page_leads_back(client, client_app, planner):
    sign_in(client, client_app, planner)
    grant = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    page = client.get("/oauth/agents/", {"next": "/admin/registry/"})
    assert 'href="/admin/registry/" id="back-link"' in page.content.decode()

    response = client.post(
        f"/oauth/agents/{grant.pk}/revoke/", {"next": "/admin/registry/"}, follow=True
    )
    text = response.content.decode()
    assert text.count("연결을 해제했습니다") == 1
    assert 'href="/admin/registry/" id="back-link"' in text  # kept after the revoke
    assert "연결을 해제했습니다" not in client.get("/oauth/agents/").content.decode()


def test_the_way_back_is_never_off_site_and_defaults_to_the_admin_for_staff(client, planner):
    client.force_login(planner)
    text = client.get("/oauth/agents/", {"next": "https://evil.example/"}).content.decode()
    assert "evil.example" not in text and 'id="back-link"' not in text  # not staff: none

    staff = get_user_model().objects.create_user("operator-1", password="pw", is_staff=True)
    client.force_login(staff)
    text = client.get("/oauth/agents/", {"next": "//evil.example/"}).content.decode()
    assert 'href="/admin/" id="back-link"' in text


# --- a client seen through its metadata document is audited once --------------------------------


def test_a_metadata_document_client_is_audited_once_when_first_seen(
    client, planner, cimd, tls_files
):
    with document_server(tls_files, good_document) as base:
        agent = Client(f"{base}/client.json")
        client.force_login(planner)
        for _ in range(3):  # three requests, one new client
            page = client.get("/oauth/authorize/", authorize_params(agent, new_pkce()))
            assert page.status_code == 200, page.content[:500]
        # Its document read again once the cache has run out: the same client, no new event.
        Application = get_application_model()
        Application.objects.filter(client_id=agent.client_id).update(
            cimd_expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert (
            client.get("/oauth/authorize/", authorize_params(agent, new_pkce())).status_code == 200
        )
    application = Application.objects.get(client_id=agent.client_id)
    assert application.cimd_expires_at > timezone.now()  # it was refetched
    events = AuditEvent.objects.filter(action=AuditEvent.Action.OAUTH_CLIENT_CREATED)
    assert events.count() == 1
    event = events.get()
    assert event.target == f"oauth_client:{application.pk}"
    assert event.changes["after"]["client_id"] == agent.client_id
    assert event.changes["after"]["name"] == "Loopback agent"
    assert event.changes["after"]["registration_source"] == "cimd"
    assert event.actor == "system"


def test_a_client_registered_in_advance_is_audited_where_it_is_registered_only(client_app):
    # The fixture's row is created directly: only create_oauth_client and the admin audit those.
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.OAUTH_CLIENT_CREATED).exists()
