"""A grant's life after the code: refresh rotates both tokens under the same delegation; a reused
refresh token ends the grant; revocation (by the client, RFC 7009, or on the user's page) ends it
at the next request."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from audit.models import AuditEvent
from mcpserver.principals import authenticate_token
from registry.models import TokenDelegation
from signin.grants import REFRESH_RACE_SECONDS
from tests.signin.conftest import exchange, sign_in

pytestmark = pytest.mark.django_db


def signed_in(client, app, user) -> dict:
    pkce, answer = sign_in(client, app, user)
    response = exchange(client, app, answer["code"], pkce)
    assert response.status_code == 200, response.content
    return response.json()


def refresh(client, app, refresh_token: str):
    return client.post(
        "/oauth/token/",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id},
    )


def test_a_refresh_issues_new_tokens_under_the_same_delegation(client, client_app, planner):
    first = signed_in(client, client_app, planner)
    delegation = authenticate_token(first["access_token"]).principal.delegation_id
    response = refresh(client, client_app, first["refresh_token"])
    assert response.status_code == 200, response.content
    second = response.json()
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    assert authenticate_token(second["access_token"]).principal.delegation_id == delegation
    assert authenticate_token(first["access_token"]).principal is None  # rotated away
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.DELEGATION_REFRESHED, target=f"delegation:{delegation}"
    ).exists()
    assert TokenDelegation.objects.filter(source=TokenDelegation.Source.SIGNED_IN).count() == 1


def rotated_a_while_ago() -> None:
    """Age every rotation past REFRESH_RACE_SECONDS: what comes next is reuse, not a race."""
    get_refresh_token_model().objects.filter(revoked__isnull=False).update(
        revoked=F("revoked") - timedelta(seconds=REFRESH_RACE_SECONDS + 1)
    )


def test_a_reused_refresh_token_revokes_the_whole_grant(client, client_app, planner):
    first = signed_in(client, client_app, planner)
    second = refresh(client, client_app, first["refresh_token"]).json()
    rotated_a_while_ago()
    reuse = refresh(client, client_app, first["refresh_token"])
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.revoked_at is not None
    assert authenticate_token(second["access_token"]).principal is None
    assert refresh(client, client_app, second["refresh_token"]).status_code == 400
    refused = (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.OAUTH_TOKEN_REFUSED, detail="refresh_token_reused"
        )
        .order_by("sequence")
        .first()
    )
    assert refused.delegation_id == delegation.pk
    assert refused.changes["client_id"] == client_app.client_id


def test_a_refresh_token_presented_again_just_after_its_rotation_is_refused_and_the_grant_stays(
    client, client_app, planner
):
    """Within REFRESH_RACE_SECONDS a rotated token is the agent's own concurrent refresh that
    lost: refused, audited, and the winner's tokens keep working."""
    first = signed_in(client, client_app, planner)
    second = refresh(client, client_app, first["refresh_token"]).json()
    late = refresh(client, client_app, first["refresh_token"])
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    assert authenticate_token(second["access_token"]).principal is not None
    assert refresh(client, client_app, second["refresh_token"]).status_code == 200
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.OAUTH_TOKEN_REFUSED, detail="refresh_token_raced"
    ).exists()


def test_an_expired_access_token_is_refused_until_refreshed(client, client_app, planner):
    tokens = signed_in(client, client_app, planner)
    TokenDelegation.objects.update(token_expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate_token(tokens["access_token"]).failure == "expired"
    renewed = refresh(client, client_app, tokens["refresh_token"]).json()
    assert authenticate_token(renewed["access_token"]).principal is not None


@pytest.mark.parametrize("which", ["access_token", "refresh_token"])
def test_the_client_revoking_either_token_ends_the_grant(client, client_app, planner, which):
    tokens = signed_in(client, client_app, planner)
    response = client.post(
        "/oauth/revoke_token/",
        {"token": tokens[which], "token_type_hint": which, "client_id": client_app.client_id},
    )
    assert response.status_code == 200
    assert authenticate_token(tokens["access_token"]).principal is None
    assert refresh(client, client_app, tokens["refresh_token"]).status_code == 400
    assert AuditEvent.objects.filter(action=AuditEvent.Action.DELEGATION_REVOKED).exists()


def test_another_client_cannot_revoke_a_grant(client, client_app, planner):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    other = Application.objects.create(
        name="Other",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/cb",
    )
    tokens = signed_in(client, client_app, planner)
    response = client.post(
        "/oauth/revoke_token/", {"token": tokens["access_token"], "client_id": other.client_id}
    )
    assert response.status_code == 200  # RFC 7009: not the client's token, not reported
    assert authenticate_token(tokens["access_token"]).principal is not None


def test_a_grant_revoked_on_the_users_page_cannot_be_refreshed(client, client_app, planner):
    tokens = signed_in(client, client_app, planner)
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    page = client.get("/oauth/agents/")
    assert page.status_code == 200
    assert client_app.client_id.encode() in page.content
    response = client.post(f"/oauth/agents/{delegation.pk}/revoke/")
    assert response.status_code == 302
    assert authenticate_token(tokens["access_token"]).principal is None
    assert refresh(client, client_app, tokens["refresh_token"]).status_code == 400
    revoked = AuditEvent.objects.get(action=AuditEvent.Action.DELEGATION_REVOKED)
    assert revoked.actor == planner.username
