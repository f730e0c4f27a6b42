"""The authorization server in-process: a sign-in ends in a delegation, whose access token /mcp's
gate knows; codes and tokens are kept as fingerprints only."""

import pytest
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from audit.models import AuditEvent
from mcpserver.principals import authenticate_token
from registry.models import TokenDelegation
from tests.signin.conftest import REDIRECT, TOOL, exchange, sign_in

pytestmark = pytest.mark.django_db


def test_a_sign_in_is_a_delegation_whose_access_token_the_gate_knows(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    assert answer["_base"] == REDIRECT
    assert answer["iss"] == "http://testserver"
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.stakeholder_id == "KB-P-001"
    assert delegation.created_by == planner
    assert delegation.oauth_client_id == client_app.client_id
    assert delegation.tools == [TOOL]
    granted = AuditEvent.objects.get(action=AuditEvent.Action.DELEGATION_GRANTED)
    assert granted.changes["after"]["client_id"] == client_app.client_id

    response = exchange(client, client_app, answer["code"], pkce)
    assert response.status_code == 200, response.content
    tokens = response.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].startswith("hboat_")
    assert tokens["refresh_token"].startswith("hbort_")
    principal = authenticate_token(tokens["access_token"]).principal
    assert principal is not None and principal.stakeholder_id == "KB-P-001"
    assert principal.delegation_id == delegation.pk

    # Nothing the agent holds is in the toolkit's tables.
    for model in (get_access_token_model(), get_refresh_token_model(), get_grant_model()):
        for row in model.objects.values():
            text = repr(row)
            for secret in (tokens["access_token"], tokens["refresh_token"], answer["code"]):
                assert secret not in text


def test_a_code_is_good_once(client, client_app, planner):
    pkce, answer = sign_in(client, client_app, planner)
    assert exchange(client, client_app, answer["code"], pkce).status_code == 200
    replay = exchange(client, client_app, answer["code"], pkce)
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"


@pytest.mark.parametrize(
    ("language", "title", "approve"),
    [("ko", "에이전트 연결 승인", "승인"), ("en", "Approve agent connection", "Approve")],
)
def test_the_consent_page_is_korean_by_default_and_english_on_request(
    client, client_app, planner, language, title, approve
):
    from tests.signin.conftest import authorize_params, new_pkce

    client.force_login(planner)
    page = client.get(
        "/oauth/authorize/",
        authorize_params(client_app, new_pkce()),
        HTTP_ACCEPT_LANGUAGE=language,
    )
    text = page.content.decode()
    assert page.status_code == 200
    assert f"<title>{title} | hyperbook</title>" in text
    assert f'value="{approve}"' in text
    assert "KB-P-001" in text and "Test agent" in text
