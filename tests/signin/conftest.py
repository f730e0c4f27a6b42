import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

from kb.models import Stakeholder
from signin.models import StakeholderLogin
from tests.mcpserver.conftest import world  # noqa: F401  (re-exported fixture)

TOOL = "ords.query.kb_select_ai_vpd"
REDIRECT = "http://127.0.0.1:8765/callback"
RESOURCE = "http://testserver/mcp"


@dataclass
class Pkce:
    verifier: str
    challenge: str


def new_pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode())


@pytest.fixture
def kb(kb_demo, db):
    """The demo data inside this test's transaction."""


@pytest.fixture
def client_app(db):
    Application = get_application_model()
    return Application.objects.create(
        name="Test agent",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT,
    )


def linked_user(username: str, stakeholder_id: str):
    user = get_user_model().objects.create_user(username, password="pw-" + username)
    StakeholderLogin.objects.create(
        user=user, stakeholder=Stakeholder.objects.get(stakeholder_id=stakeholder_id)
    )
    return user


@pytest.fixture
def planner(kb):
    return linked_user("kb-p-001", "KB-P-001")


def authorize_params(app, pkce: Pkce, **overrides) -> dict:
    params = {
        "response_type": "code",
        "client_id": app.client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "state": "st-" + secrets.token_hex(4),
        "resource": RESOURCE,
        "scope": TOOL,
    }
    params.update(overrides)
    return {k: v for k, v in params.items() if v is not None}


def consent_form(response) -> dict:
    """The consent page's form as a browser would post it (hidden fields and defaults)."""
    form = response.context["form"]
    data = {name: form[name].value() or "" for name in form.fields if name not in ("tools",)}
    data["tools"] = form["tools"].value() or []
    data["expires_on"] = str(form["expires_on"].value())
    return data


def redirect_query(response) -> dict:
    assert response.status_code == 302, response.content[:500]
    location = response["Location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()} | {
        "_base": location.split("?")[0]
    }


def sign_in(client, app, user, pkce: Pkce | None = None, **overrides):
    """Log in, open the consent page, approve; the redirect's query (code, state, iss)."""
    pkce = pkce or new_pkce()
    client.force_login(user)
    page = client.get("/oauth/authorize/", authorize_params(app, pkce, **overrides))
    assert page.status_code == 200, page.content[:800]
    data = consent_form(page) | {"allow": "true"}
    return pkce, redirect_query(client.post("/oauth/authorize/", data))


def exchange(client, app, code: str, pkce: Pkce, **overrides):
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": app.client_id,
        "code_verifier": pkce.verifier,
        "resource": RESOURCE,
    }
    data.update(overrides)
    return client.post("/oauth/token/", {k: v for k, v in data.items() if v is not None})
