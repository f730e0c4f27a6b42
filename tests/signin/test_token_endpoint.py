"""The token endpoint answers the grants hyperbook offers and nothing else: any other grant type is
unsupported_grant_type before a user, password or client is looked at. A code is good for one
exchange and one try; a replay revokes what it produced. Redirect URIs match exactly."""

import json
from unittest import mock

import pytest
from django.contrib.auth import authenticate as real_authenticate
from django.contrib.auth import get_user_model
from django.core.cache import cache
from oauth2_provider.models import get_access_token_model, get_grant_model

from audit.models import AuditEvent
from mcpserver.principals import authenticate_token
from registry.models import TokenDelegation
from signin.server import ACCEPTED_GRANTS, JWT_BEARER_GRANT, offered_grants
from signin.validator import DelegationValidator
from tests.signin.conftest import (
    REDIRECT,
    authorize_params,
    exchange,
    new_pkce,
    redirect_query,
    sign_in,
)

pytestmark = pytest.mark.django_db

NOT_OFFERED = [
    "password",
    "client_credentials",
    "urn:ietf:params:oauth:grant-type:device_code",
    "implicit",
    "token",
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "urn:ietf:params:oauth:grant-type:saml2-bearer",
    "AUTHORIZATION_CODE",
    "authorization_code ",
    "openid",
    "x" * 5000,
]


def refused_events(detail: str):
    return AuditEvent.objects.filter(action=AuditEvent.Action.OAUTH_TOKEN_REFUSED, detail=detail)


@pytest.fixture
def counted():
    """Every way a token request could read a user, a password or a client: counted."""
    calls = []

    def spy(name, real):
        def wrapper(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)

        return wrapper

    patches = [
        mock.patch(
            "oauth2_provider.oauth2_validators.authenticate",
            spy("authenticate", real_authenticate),
        ),
        mock.patch(
            "django.contrib.auth.backends.ModelBackend.authenticate",
            autospec=True,
            side_effect=spy("backend", lambda *a, **k: None),
        ),
        mock.patch(
            "django.contrib.auth.hashers.check_password",
            side_effect=spy("check_password", lambda *a, **k: False),
        ),
    ]
    for name in (
        "validate_user",
        "authenticate_client",
        "authenticate_client_id",
        "client_authentication_required",
        "validate_client_id",
        "validate_code",
        "validate_refresh_token",
    ):
        patches.append(
            mock.patch.object(
                DelegationValidator,
                name,
                autospec=True,
                side_effect=spy(name, getattr(DelegationValidator, name)),
            )
        )
    for patch in patches:
        patch.start()
    yield calls
    for patch in patches:
        patch.stop()


@pytest.mark.parametrize("grant_type", NOT_OFFERED)
def test_a_grant_hyperbook_does_not_offer_is_unsupported_before_anything_is_read(
    client, client_app, counted, grant_type
):
    get_user_model().objects.create_user("victim", password="right-password")
    cache.clear()
    answers = []
    for password in ("right-password", "wrong-password"):
        response = client.post(
            "/oauth/token/",
            {
                "grant_type": grant_type,
                "username": "victim",
                "password": password,
                "client_id": client_app.client_id,
                "client_secret": "whatever",
                "scope": "ords.query.kb_select_ai_vpd",
            },
        )
        assert response.status_code == 400
        assert response["Content-Type"] == "application/json"
        answers.append(response.json())
    # The same answer whatever the password: no oracle.
    assert answers[0] == answers[1]
    assert answers[0]["error"] == "unsupported_grant_type"
    assert counted == []  # no user, password, client or secret was looked at
    assert refused_events("unsupported_grant_type").count() == 2
    assert not get_access_token_model().objects.exists()


def test_the_device_flow_without_a_device_code_is_unsupported_not_a_500(client):
    response = client.post(
        "/oauth/token/", {"grant_type": "urn:ietf:params:oauth:grant-type:device_code"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"grant_type": ""},
        {"code": "x", "client_id": "y"},  # oauthlib's default would have been authorization_code
    ],
)
def test_a_token_request_without_a_grant_type_is_invalid(client, body, counted):
    response = client.post("/oauth/token/", body)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert counted == []


def test_a_repeated_parameter_is_invalid_not_guessed(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    body = (
        f"grant_type=authorization_code&grant_type=password&code={answer['code']}"
        f"&client_id={client_app.client_id}&code_verifier={pkce.verifier}"
    )
    response = client.post("/oauth/token/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_unsupported_grants_are_audited_one_by_one_up_to_the_budget(client, settings):
    settings.AUDIT_REFUSALS_PER_ADDRESS = 2
    cache.clear()
    for _ in range(5):
        response = client.post("/oauth/token/", {"grant_type": "password"})
        assert response.json()["error"] == "unsupported_grant_type"
    events = AuditEvent.objects.filter(action=AuditEvent.Action.OAUTH_TOKEN_REFUSED)
    assert events.count() == 3
    assert events.filter(detail__contains="budget reached").count() == 1
    assert {e.changes["grant_type"] for e in events} == {"password"}
    assert {e.client_address for e in events} == {"127.0.0.1"}


def test_the_metadata_advertises_exactly_the_grants_answered(client):
    metadata = json.loads(client.get("/.well-known/oauth-authorization-server").content)
    assert metadata["grant_types_supported"] == [
        "authorization_code",
        "refresh_token",
        JWT_BEARER_GRANT,
    ]
    assert metadata["authorization_grant_profiles_supported"] == [
        "urn:ietf:params:oauth:grant-profile:id-jag"
    ]
    assert metadata["grant_types_supported"] == offered_grants()
    assert set(offered_grants()) <= set(ACCEPTED_GRANTS)
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]


# --- codes: one exchange, one try ---------------------------------------------------------------


def test_a_replayed_code_revokes_what_it_first_produced(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    tokens = exchange(client, client_app, answer["code"], pkce).json()
    assert authenticate_token(tokens["access_token"]).principal is not None

    replay = exchange(client, client_app, answer["code"], pkce)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.revoked_at is not None
    assert authenticate_token(tokens["access_token"]).principal is None
    renewal = client.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client_app.client_id,
        },
    )
    assert renewal.status_code == 400
    event = refused_events("code_replayed").get()
    assert event.delegation_id == delegation.pk
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.DELEGATION_REVOKED, target=f"delegation:{delegation.pk}"
    ).exists()


@pytest.mark.parametrize(
    "wrong",
    [
        "a" * 43,  # well formed, not the one
        "a" * 42,  # too short
        "a" * 129,  # too long
        "é" * 43,  # outside the alphabet
        "a" * 42 + "/",
    ],
)
def test_a_wrong_verifier_burns_the_code(client, client_app, planner, wrong):
    pkce, answer = sign_in(client, client_app, planner)
    first = exchange(client, client_app, answer["code"], pkce, code_verifier=wrong)
    assert first.status_code == 400 and first.json()["error"] == "invalid_grant"
    assert not get_grant_model().objects.exists()
    second = exchange(client, client_app, answer["code"], pkce)  # now the right one
    assert second.status_code == 400 and second.json()["error"] == "invalid_grant"
    assert not get_access_token_model().objects.exists()
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.revoked_at is not None  # the consent it carried ends with it
    assert refused_events("code_failed").count() == 1


def test_a_code_exchanged_with_another_redirect_uri_is_burnt(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    other = exchange(
        client, client_app, answer["code"], pkce, redirect_uri="http://127.0.0.1:9999/callback"
    )
    assert other.status_code == 400
    assert exchange(client, client_app, answer["code"], pkce).status_code == 400


@pytest.mark.parametrize(
    "challenge",
    ["a" * 42, "a" * 129, "a" * 42 + "+", "a" * 42 + "=", "한" * 43, " " + "a" * 43],
)
def test_a_challenge_outside_rfc_7636s_form_is_refused(client, client_app, planner, challenge):
    client.force_login(planner)
    pkce = new_pkce()
    response = client.get(
        "/oauth/authorize/", authorize_params(client_app, pkce, code_challenge=challenge)
    )
    answer = redirect_query(response)
    assert answer["_base"] == REDIRECT
    assert answer["error"] == "invalid_request"
    assert not get_grant_model().objects.exists()


def test_pkce_is_required_and_s256_only_at_the_token_endpoint_too(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    grant = get_grant_model().objects.get()
    assert grant.code_challenge_method == "S256"
    plain = exchange(client, client_app, answer["code"], pkce, code_verifier=pkce.challenge)
    assert plain.status_code == 400  # the challenge itself, as "plain" would take it


# --- redirect URIs: exact -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect_uri",
    [
        REDIRECT + "?extra=1",
        REDIRECT + "?",
        REDIRECT + "#fragment",
        REDIRECT + "/",
        "http://127.0.0.1:8765/Callback",
        "http://user@127.0.0.1:8765/callback",
        "http://127.0.0.1:8765/callback/../callback",
        "http://127.0.0.1:8765//callback",
        "https://127.0.0.1:8765/callback",
        "http://127.0.0.2:8765/callback",
        "http://localhost:8765/callback",  # not what was registered
        "http://127.0.0.1:8765:99/callback",
        "http://127.0.0.1:123456/callback",
        "http://127.0.0.1:/callback?x",
    ],
)
def test_a_redirect_uri_that_is_not_exactly_the_registered_one_is_refused(
    client, client_app, planner, redirect_uri
):
    client.force_login(planner)
    response = client.get(
        "/oauth/authorize/", authorize_params(client_app, new_pkce(), redirect_uri=redirect_uri)
    )
    assert response.status_code == 400
    assert "Location" not in response


@pytest.mark.parametrize(
    ("registered", "asked", "allowed"),
    [
        ("https://agent.example/cb?tenant=a", "https://agent.example/cb?tenant=a", True),
        ("https://agent.example/cb?tenant=a", "https://agent.example/cb?tenant=a&x=1", False),
        ("https://agent.example/cb?tenant=a", "https://agent.example/cb", False),
        ("https://agent.example/cb", "https://AGENT.example/cb", False),
        ("https://agent.example/cb", "https://agent.example:443/cb", False),
        ("https://agent.example/cb", "https://agent.example:8443/cb", False),
        ("http://127.0.0.1/cb", "http://127.0.0.1:50123/cb", True),  # RFC 8252 §7.3
        ("http://127.0.0.1:8000/cb", "http://127.0.0.1:50123/cb", True),
        ("http://127.0.0.1:8000/cb?x=1", "http://127.0.0.1:50123/cb?x=1", True),
        ("http://127.0.0.1:8000/cb?x=1", "http://127.0.0.1:50123/cb?x=2", False),
        ("http://[::1]:8000/cb", "http://[::1]:1/cb", True),
        ("http://localhost:8000/cb", "http://localhost:50123/cb", True),
        ("http://127.0.0.1:8000/cb", "http://[::1]:8000/cb", False),
        ("https://127.0.0.1:8000/cb", "https://127.0.0.1:50123/cb", False),  # http only
        ("http://agent.example:8000/cb", "http://agent.example:8001/cb", False),
    ],
)
def test_the_redirect_rule(registered, asked, allowed):
    from signin.server import redirect_uri_matches

    assert redirect_uri_matches(asked, registered) is allowed
