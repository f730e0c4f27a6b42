"""Several requests redeem one refresh token, or one code, at the same moment: real threads, each
with its own database connection, against the real token endpoint, on SQLite and PostgreSQL.

Committed data (transactional_db): the threads see only what is committed, so this module sets
up its own stakeholder instead of the demo data's module-wide transaction."""

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from oauth2_provider.models import get_application_model

from audit.models import AuditEvent
from kb.models import Stakeholder
from mcpserver.principals import authenticate_token
from registry.models import TokenDelegation
from signin.models import StakeholderLogin
from tests.signin.conftest import REDIRECT, exchange, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

RACERS = 4
ROUNDS = 3


@pytest.fixture
def app_and_user():
    Application = get_application_model()
    app = Application.objects.create(
        name="Racing agent",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT,
    )
    stakeholder = Stakeholder.objects.create(
        stakeholder_id="KB-P-901", name="Racer", role=Stakeholder.Role.PLANNER
    )
    user = get_user_model().objects.create_user("racer", password="racer-pw")
    StakeholderLogin.objects.create(user=user, stakeholder=stakeholder)
    return app, user


def race(post) -> list:
    """`post(client)` from RACERS threads released together; their responses."""
    barrier = threading.Barrier(RACERS)
    responses: list = [None] * RACERS
    errors: list = []

    def racer(n: int) -> None:
        client = Client()
        try:
            barrier.wait(timeout=30)
            responses[n] = post(client)
        except Exception as exc:  # reported below; a thread's exception would be lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)
    return responses


def refresh_post(app, refresh_token: str):
    def post(client):
        return client.post(
            "/oauth/token/",
            {
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": app.client_id,
            },
        )

    return post


def test_of_concurrent_refreshes_exactly_one_wins_and_the_grant_stays(app_and_user):
    app, user = app_and_user
    client = Client()
    pkce, answer = sign_in(client, app, user)
    tokens = exchange(client, app, answer["code"], pkce).json()
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)

    for _round in range(ROUNDS):
        responses = race(refresh_post(app, tokens["refresh_token"]))
        statuses = sorted(response.status_code for response in responses)
        assert statuses == [200] + [400] * (RACERS - 1), [r.content for r in responses]
        winner = next(r.json() for r in responses if r.status_code == 200)
        assert winner["access_token"].startswith("hboat_")
        assert winner["refresh_token"].startswith("hbort_")
        assert {r.json()["error"] for r in responses if r.status_code == 400} == {"invalid_grant"}
        # The winner's pair is the grant's: its access token works, and it refreshes next round.
        principal = authenticate_token(winner["access_token"]).principal
        assert principal is not None and principal.delegation_id == delegation.pk
        assert authenticate_token(tokens["access_token"]).principal is None
        tokens = winner

    delegation.refresh_from_db()
    assert delegation.revoked_at is None
    raced = AuditEvent.objects.filter(
        action=AuditEvent.Action.OAUTH_TOKEN_REFUSED, detail="refresh_token_raced"
    )
    assert raced.count() == ROUNDS * (RACERS - 1)
    assert AuditEvent.objects.filter(action=AuditEvent.Action.DELEGATION_REFRESHED).count() == (
        ROUNDS
    )


def test_of_concurrent_exchanges_of_one_code_one_wins_and_the_replay_ends_the_grant(
    app_and_user,
):
    app, user = app_and_user
    client = Client()
    pkce, answer = sign_in(client, app, user)

    responses = race(lambda racer: exchange(racer, app, answer["code"], pkce))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [400] * (RACERS - 1), [r.content for r in responses]
    assert {r.json()["error"] for r in responses if r.status_code == 400} == {"invalid_grant"}
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert winner["access_token"]
    # A code used more than once: what it produced is revoked (RFC 6749 §4.1.2).
    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    assert delegation.revoked_at is not None
    assert authenticate_token(winner["access_token"]).principal is None
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.OAUTH_TOKEN_REFUSED, detail="code_replayed"
    ).exists()
