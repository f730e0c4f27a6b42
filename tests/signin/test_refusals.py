"""Each hostile or broken authorization request is refused with a clear error, and nothing is
issued: no delegation, no code, no token."""

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_access_token_model, get_grant_model

from registry.models import TokenDelegation
from tests.signin.conftest import (
    REDIRECT,
    authorize_params,
    consent_form,
    exchange,
    new_pkce,
    redirect_query,
    sign_in,
)

pytestmark = pytest.mark.django_db


def nothing_issued():
    assert not TokenDelegation.objects.filter(source=TokenDelegation.Source.SIGNED_IN).exists()
    assert not get_grant_model().objects.exists()
    assert not get_access_token_model().objects.exists()


def authorize(client, app, user, **overrides):
    client.force_login(user)
    return client.get("/oauth/authorize/", authorize_params(app, new_pkce(), **overrides))


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example/callback",
        "http://127.0.0.1:8765/other",
        "http://evil.example:8765/callback",
        "http://127.0.0.1.evil.example:8765/callback",
        "//evil.example/callback",
    ],
)
def test_an_unregistered_redirect_uri_is_never_redirected_to(
    client, client_app, planner, redirect_uri
):
    response = authorize(client, client_app, planner, redirect_uri=redirect_uri)
    assert response.status_code == 400
    assert "Location" not in response
    assert "evil" not in response.get("Location", "")
    nothing_issued()


def test_a_loopback_redirect_uri_may_use_any_port(client, client_app, planner):
    response = authorize(
        client, client_app, planner, redirect_uri="http://127.0.0.1:40123/callback"
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"resource": None}, "invalid_target"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
        # The server has no implicit grant at all (signin.server.TokenServer): not offered.
        ({"response_type": "token"}, "unsupported_response_type"),
    ],
)
def test_a_request_outside_the_rules_is_answered_with_an_error_redirect(
    client, client_app, planner, overrides, error
):
    response = authorize(client, client_app, planner, **overrides)
    answer = redirect_query(response)
    assert answer["_base"] == REDIRECT
    assert answer["error"] == error
    assert answer["iss"] == "http://testserver"
    assert "code" not in answer
    nothing_issued()


def test_a_missing_or_wrong_verifier_gets_no_token(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    assert exchange(client, client_app, answer["code"], pkce, code_verifier=None).status_code == 400
    pkce2, answer2 = sign_in(client, client_app, planner)
    wrong = exchange(client, client_app, answer2["code"], pkce2, code_verifier=pkce.verifier)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert not get_access_token_model().objects.exists()


def test_a_token_request_for_another_resource_is_refused(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    response = exchange(client, client_app, answer["code"], pkce, resource="https://other/mcp")
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"
    assert not get_access_token_model().objects.exists()


def test_denying_redirects_with_access_denied_and_creates_nothing(client, client_app, planner):
    page = authorize(client, client_app, planner)
    response = client.post("/oauth/authorize/", consent_form(page))  # no "allow"
    answer = redirect_query(response)
    assert answer["error"] == "access_denied"
    assert answer["iss"] == "http://testserver"
    nothing_issued()


def test_a_login_without_a_stakeholder_cannot_approve(client, client_app, kb):
    staff = get_user_model().objects.create_user("unlinked", password="x", is_staff=True)
    page = authorize(client, client_app, staff)
    assert page.status_code == 200
    assert b'id="no-stakeholder"' in page.content
    assert b'id="approve"' not in page.content
    forced = client.post("/oauth/authorize/", consent_form(page) | {"allow": "true"})
    assert forced.status_code == 400
    nothing_issued()


def test_consent_needs_csrf_and_cannot_be_framed(client_app, planner):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(planner)
    page = browser.get("/oauth/authorize/", authorize_params(client_app, new_pkce()))
    assert page["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    forged = browser.post("/oauth/authorize/", consent_form(page) | {"allow": "true"})
    assert forged.status_code == 403
    nothing_issued()


def test_anonymous_is_sent_to_the_login_page_first(client, client_app):
    response = client.get("/oauth/authorize/", authorize_params(client_app, new_pkce()))
    assert response.status_code == 302
    assert urlsplit(response["Location"]).path == "/oauth/login/"
    assert "next" in parse_qs(urlsplit(response["Location"]).query)


def test_expiry_beyond_the_longest_lifetime_is_refused_beside_the_field(
    client, client_app, planner, settings
):
    page = authorize(client, client_app, planner)
    data = consent_form(page) | {"allow": "true", "expires_on": "2999-01-01"}
    response = client.post("/oauth/authorize/", data)
    assert response.status_code == 400
    assert response.context["form"].errors["expires_on"]
    nothing_issued()


def test_a_tool_the_server_does_not_offer_cannot_be_granted(client, client_app, planner):
    page = authorize(client, client_app, planner)
    response = client.post(
        "/oauth/authorize/", consent_form(page) | {"allow": "true", "tools": ["rm.rf"]}
    )
    assert response.status_code == 400
    assert response.context["form"].errors["tools"]
    nothing_issued()


def test_the_metadata_document_says_what_the_server_does(client):
    metadata = json.loads(client.get("/.well-known/oauth-authorization-server").content)
    assert metadata["issuer"] == "http://testserver"
    assert metadata["authorization_endpoint"] == "http://testserver/oauth/authorize/"
    assert metadata["token_endpoint"] == "http://testserver/oauth/token/"
    assert metadata["revocation_endpoint"] == "http://testserver/oauth/revoke_token/"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert set(metadata["grant_types_supported"]) == {
        "authorization_code",
        "refresh_token",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",  # SEP-990's ID-JAG, confidential clients
    }
    assert metadata["response_types_supported"] == ["code"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert "registration_endpoint" not in metadata  # dynamic registration is off by default


def test_dynamic_registration_is_off_unless_enabled(client, settings):
    body = {"redirect_uris": ["http://127.0.0.1:9999/cb"], "token_endpoint_auth_method": "none"}
    off = client.post("/oauth/register/", json.dumps(body), content_type="application/json")
    assert off.status_code == 400  # with what to do instead (test_what_clients_show.py)
    assert off.json()["error"] == "invalid_client_metadata"

    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": True}
    metadata = json.loads(client.get("/.well-known/oauth-authorization-server").content)
    assert metadata["registration_endpoint"] == "http://testserver/oauth/register/"
    on = client.post("/oauth/register/", json.dumps(body), content_type="application/json")
    assert on.status_code == 201, on.content
    assert on.json()["client_id"]


def test_a_suspended_stakeholders_login_cannot_approve(client, client_app, kb):
    from tests.signin.conftest import linked_user

    suspended = linked_user("kb-p-099", "KB-P-099")
    page = authorize(client, client_app, suspended)
    response = client.post("/oauth/authorize/", consent_form(page) | {"allow": "true"})
    assert response.status_code == 400
    assert "정지된 사용자" in response.content.decode()
    nothing_issued()


def test_the_login_page_never_sends_anyone_to_another_site(client, planner):
    response = client.post(
        "/oauth/login/?next=https://evil.example/steal",
        {"username": "kb-p-001", "password": "pw-kb-p-001"},
    )
    assert response.status_code == 302
    assert "evil.example" not in response["Location"]
