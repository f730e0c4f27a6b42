"""SEP-990 in-process: an enterprise IdP's ID-JAG, presented with the RFC 7523 jwt-bearer grant by
a confidential client, becomes a delegation acting as the stakeholder its subject is linked to; an
assertion that fails any check is invalid_grant, says why, and is audited."""

import json
import time

import jwt
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from audit.models import AuditEvent
from mcpserver.principals import authenticate_token
from registry.models import TokenDelegation
from signin.models import EnterpriseIdp, SeenAssertion
from signin.server import JWT_BEARER_GRANT
from tests.signin.conftest import RESOURCE, TOOL, linked_user
from tests.signin.enterprise_idp import CLIENT_SECRET, TestIdp, confidential_client

pytestmark = pytest.mark.django_db

ISSUER = "http://testserver"  # our issuer in tests: the request's origin


@pytest.fixture
def idp():
    return TestIdp()


@pytest.fixture
def agent(db):
    return confidential_client()


@pytest.fixture
def trusted(idp, agent):
    return idp.register(client_ids=[agent.client_id], tools=[TOOL])


def present(client, agent, assertion, secret=CLIENT_SECRET, **extra):
    data = {
        "grant_type": JWT_BEARER_GRANT,
        "assertion": assertion,
        "client_id": agent.client_id,
        "client_secret": secret,
        "resource": RESOURCE,
        **extra,
    }
    return client.post("/oauth/token/", {k: v for k, v in data.items() if v is not None})


def good_jag(idp, agent, **overrides):
    values = {
        "audience": ISSUER,
        "resource": RESOURCE,
        "client_id": agent.client_id,
        "subject": "kb-p-001",
    }
    return idp.id_jag(**(values | overrides))


def refusals():
    return AuditEvent.objects.filter(action=AuditEvent.Action.OAUTH_TOKEN_REFUSED)


def test_an_id_jag_becomes_a_delegation_as_the_linked_stakeholder(
    client, kb, planner, idp, agent, trusted
):
    response = present(client, agent, good_jag(idp, agent))
    assert response.status_code == 200, response.content
    tokens = response.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].startswith("hboat_")
    assert "refresh_token" not in tokens  # SEP-990: the IdP decides the session's length
    assert tokens["scope"] == TOOL

    delegation = TokenDelegation.objects.get(source=TokenDelegation.Source.ENTERPRISE)
    assert delegation.stakeholder_id == "KB-P-001"
    assert delegation.created_by == planner  # so it is on their agents page
    assert delegation.oauth_client_id == agent.client_id
    assert delegation.tools == [TOOL]
    assert delegation.audience == RESOURCE
    assert delegation.oauth_token_family is None
    principal = authenticate_token(tokens["access_token"]).principal
    assert principal is not None and principal.stakeholder_id == "KB-P-001"
    assert principal.delegation_id == delegation.pk
    granted = AuditEvent.objects.get(action=AuditEvent.Action.DELEGATION_GRANTED)
    assert granted.actor == "system"
    assert granted.changes["after"]["idp"] == idp.issuer
    assert granted.changes["after"]["source"] == "enterprise"
    assert not get_refresh_token_model().objects.exists()
    for row in get_access_token_model().objects.values():
        assert tokens["access_token"] not in repr(row)
    assert not refusals().exists()

    # Listed on the user's own page, and revocable there: refused at the next request.
    client.force_login(planner)
    page = client.get("/oauth/agents/")
    assert f'data-grant="{delegation.pk}"'.encode() in page.content
    client.post(f"/oauth/agents/{delegation.pk}/revoke/")
    assert authenticate_token(tokens["access_token"]).principal is None


def test_es256_is_accepted_too(client, kb, planner, agent):
    idp = TestIdp(alg="ES256")
    idp.register(client_ids=[agent.client_id], tools=[TOOL])
    response = present(client, agent, good_jag(idp, agent))
    assert response.status_code == 200, response.content


def test_the_client_must_authenticate_and_be_confidential(client, kb, planner, idp, agent, trusted):
    response = present(client, agent, good_jag(idp, agent), secret="wrong-secret")
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    public = confidential_client("Public agent")
    public.client_type = public.CLIENT_PUBLIC
    public.save()
    trusted.client_ids = [agent.client_id, public.client_id]
    trusted.save()
    response = present(client, public, good_jag(idp, public), secret=None)
    assert response.status_code in (400, 401)
    assert response.json()["error"] in ("unauthorized_client", "invalid_client")
    assert not TokenDelegation.objects.exists()


def _other_key():
    return TestIdp().private_key


REFUSED = {
    # case: (ID-JAG overrides, what the description says, verified)
    "wrong iss": ({"idp": "other"}, "iss is not a trusted enterprise IdP", False),
    "wrong aud": ({"audience": "https://someone-else.example"}, "aud must be", True),
    "wrong resource": ({"resource": "https://elsewhere.example/mcp"}, "resource claim", True),
    "no resource": ({"resource": None}, "resource claim", True),
    "another client": ({"client_id": "someone-else"}, "client_id claim", True),
    "expired": ({"lifetime": -120}, "expired", True),
    "lives too long": ({"lifetime": 86400}, "must expire within 900 seconds", True),
    "bad signature": ({"key": "other"}, "signature does not verify", False),
    "wrong typ": ({"typ": "JWT"}, "typ must be oauth-id-jag+jwt", False),
    "no jti": ({"jti": None}, "lacks the jti claim", True),
    "no iat": ({"iat": None}, "lacks the iat claim", True),
    "unknown sub": ({"subject": "nobody-here"}, "sub is not linked to a stakeholder", True),
    "tool not grantable": ({"scope": "registry.admin_everything"}, "may not grant the tool", True),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_an_id_jag_failing_a_check_is_invalid_grant_and_audited(
    client, kb, planner, idp, agent, trusted, case
):
    cache.clear()
    overrides, says, verified = REFUSED[case]
    overrides = dict(overrides)
    signer = idp
    if overrides.pop("idp", None):
        signer = TestIdp(issuer="https://rogue-idp.example")
    if overrides.get("key") == "other":
        overrides["key"] = _other_key()
    response = present(client, agent, good_jag(signer, agent, **overrides))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid_grant"
    assert says in body["error_description"]
    assert not TokenDelegation.objects.exists()
    assert not get_access_token_model().objects.exists()
    event = refusals().get()
    kind = "assertion_refused" if verified else "assertion_invalid"
    assert event.detail.startswith(f"{kind}: ")
    assert says in event.detail
    assert event.changes["grant_type"] == JWT_BEARER_GRANT
    assert event.changes["client_id"] == agent.client_id


def test_a_client_the_idp_may_not_grant_is_refused(client, kb, planner, idp, agent, trusted):
    other = confidential_client("Other agent")
    response = present(client, other, good_jag(idp, other))
    assert response.status_code == 400
    assert "this IdP may not grant access to this client" in response.json()["error_description"]


def test_a_jti_is_good_once(client, kb, planner, idp, agent, trusted):
    assertion = good_jag(idp, agent)
    assert present(client, agent, assertion).status_code == 200
    replayed = present(client, agent, assertion)
    assert replayed.status_code == 400
    assert "replayed" in replayed.json()["error_description"]
    assert TokenDelegation.objects.count() == 1
    assert refusals().get().detail.startswith("assertion_refused: ")
    # Kept until the assertion's exp (a row, so a restart forgets nothing), then purged.
    seen = SeenAssertion.objects.get()
    assert seen.issuer == idp.issuer and seen.expires_at.timestamp() > time.time()


def test_the_request_scope_narrows_and_never_widens(client, kb, planner, idp, agent, trusted):
    wider = present(client, agent, good_jag(idp, agent), scope=f"{TOOL} registry.other")
    assert wider.status_code == 400
    assert wider.json()["error"] == "invalid_scope"
    narrowed = present(client, agent, good_jag(idp, agent), scope=TOOL)
    assert narrowed.status_code == 200 and narrowed.json()["scope"] == TOOL


def test_a_disabled_idp_is_not_trusted(client, kb, planner, idp, agent, trusted):
    trusted.enabled = False
    trusted.save()
    response = present(client, agent, good_jag(idp, agent))
    assert response.status_code == 400
    assert "not a trusted" in response.json()["error_description"]


def test_a_symmetric_alg_is_refused(client, kb, planner, idp, agent, trusted):
    forged = jwt.encode(
        {"iss": idp.issuer, "sub": "kb-p-001", "aud": ISSUER},
        "a-shared-secret-anyone-with-the-jwks-could-use",
        algorithm="HS256",
        headers={"typ": "oauth-id-jag+jwt", "kid": idp.kid},
    )
    response = present(client, agent, forged)
    assert response.status_code == 400
    assert "alg must be one of" in response.json()["error_description"]


def test_a_missing_assertion_is_invalid_request(client, kb, agent, trusted):
    response = present(client, agent, None)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_the_linked_user_but_another_subject_claim(client, kb, planner, idp, agent, trusted):
    """The IdP's row names which claim carries the login's name (e.g. an email-like claim)."""
    trusted.subject_claim = "preferred_username"
    trusted.save()
    linked_user("kb-m-001", "KB-M-001")
    response = present(
        client, agent, good_jag(idp, agent, subject="opaque-1234", preferred_username="kb-m-001")
    )
    assert response.status_code == 200, response.content
    assert TokenDelegation.objects.get().stakeholder_id == "KB-M-001"


def test_the_admin_registers_an_idp_audited_and_checked(client, db, idp):
    admin_user = get_user_model().objects.create_superuser("idp-admin", password="pw-idp-admin")
    client.force_login(admin_user)
    form = {
        "name": "Corp IdP",
        "issuer": idp.issuer,
        "jwks_url": "",
        "jwks": json.dumps(idp.public_jwks),
        "client_ids": json.dumps(["agent-1"]),
        "tools": json.dumps([TOOL]),
        "subject_claim": "sub",
        "enabled": "on",
    }
    no_keys = client.post("/admin/signin/enterpriseidp/add/", form | {"jwks": "{}"})
    assert no_keys.status_code == 200  # the form again, with the error
    assert not EnterpriseIdp.objects.exists()
    added = client.post("/admin/signin/enterpriseidp/add/", form)
    assert added.status_code == 302, added.content[:2000]
    row = EnterpriseIdp.objects.get()
    assert row.client_ids == ["agent-1"]
    event = AuditEvent.objects.get(action=AuditEvent.Action.ENTERPRISE_IDP_CHANGED)
    assert event.actor == "idp-admin"
    assert event.changes["after"]["jwks_kids"] == [idp.kid]
    assert event.target == f"enterprise_idp:{row.pk}"
