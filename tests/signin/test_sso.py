"""Single sign-on's rules, in process: who a person is here (found by issuer and subject, never
by name), what the claims decide at each sign-in (groups, the stakeholder link), the ID token
checks mozilla-django-oidc leaves to us, failures that become a message and an audit event and
never a 500, and the start-up checks. The real provider in a real browser is test_sso_live.py."""

import os
import subprocess
import sys
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import SuspiciousOperation
from django.test import RequestFactory
from django.test.utils import override_settings

from audit.models import AuditEvent
from core.groups import AUDITORS, MCP_ADMINS, ensure_default_groups
from signin.checks import check_sign_in_methods
from signin.models import SsoIdentity, StakeholderLogin
from signin.sso import SsoBackend
from signin.sso_accounts import Claims, SsoRefused, sso_sign_in
from tests.live import ROOT

ISSUER = "https://login.corp.example"
OTHER_ISSUER = "https://partner-login.example"
CLIENT_ID = "hyperbook"
SSO = {
    "SSO_ENABLED": True,
    "OIDC_OP_ISSUER": ISSUER,
    "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{ISSUER}/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "http://127.0.0.1:9/token",  # nothing listens: a refused connection
    "OIDC_OP_USER_ENDPOINT": "http://127.0.0.1:9/me",
    "OIDC_OP_JWKS_ENDPOINT": "http://127.0.0.1:9/jwks",
    "OIDC_RP_CLIENT_ID": CLIENT_ID,
    "OIDC_RP_CLIENT_SECRET": "sso-unit-test-secret",
    "OIDC_ADMIN_GROUPS": ["hb-operators"],
    "OIDC_AUDITOR_GROUPS": ["hb-auditors"],
}


@pytest.fixture
def groups(db):
    ensure_default_groups()


def claims(subject="sub-1", issuer=ISSUER, **userinfo) -> Claims:
    return Claims.read(issuer, {"sub": subject, **userinfo})


def product_groups(user) -> list[str]:
    return sorted(
        user.groups.filter(name__in=[MCP_ADMINS, AUDITORS]).values_list("name", flat=True)
    )


@override_settings(**SSO)
def test_a_first_sign_in_makes_a_login_that_only_the_provider_opens(groups):
    user = sso_sign_in(claims(preferred_username="ops-kim", groups=["hb-operators"]))
    assert user.get_username() == "ops-kim"
    assert not user.has_usable_password()
    assert user.is_staff and not user.is_superuser
    assert product_groups(user) == [MCP_ADMINS]
    assert SsoIdentity.objects.get(user=user).subject == "sub-1"
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {AuditEvent.Action.USER_CREATED, AuditEvent.Action.SSO_SIGNED_IN} <= actions


@override_settings(**SSO)
def test_a_person_is_found_by_issuer_and_subject_never_by_name(groups):
    local = get_user_model().objects.create_user("alice", password="local-password-123")
    first = sso_sign_in(claims(preferred_username="alice", groups=["hb-auditors"]))
    assert first.pk != local.pk
    assert first.get_username().startswith("alice.sso-")
    again = sso_sign_in(claims(preferred_username="renamed", groups=["hb-auditors"]))
    assert again.pk == first.pk, "a changed name is the same person"
    elsewhere = sso_sign_in(
        claims(issuer=OTHER_ISSUER, preferred_username="alice", groups=["hb-auditors"])
    )
    assert elsewhere.pk not in (first.pk, local.pk), "another provider's subject is another person"
    local.refresh_from_db()
    assert local.has_usable_password() and not local.groups.exists()


@override_settings(**SSO)
def test_the_claims_decide_the_groups_at_every_sign_in(groups):
    user = sso_sign_in(claims(groups=["hb-operators", "hb-auditors"]))
    custom = Group.objects.create(name="night-shift")
    user.groups.add(custom)
    assert product_groups(user) == [AUDITORS, MCP_ADMINS]
    user = sso_sign_in(claims(groups="hb-auditors"))  # one group, as a bare string
    assert product_groups(user) == [AUDITORS]
    assert user.groups.filter(name="night-shift").exists(), "groups hyperbook does not define stay"
    changed = AuditEvent.objects.filter(action=AuditEvent.Action.USER_CHANGED).order_by("pk").last()
    assert changed.changes["before"]["groups"] == [AUDITORS, MCP_ADMINS]
    assert changed.changes["after"]["groups"] == [AUDITORS]


@override_settings(**SSO)
def test_the_claims_decide_the_stakeholder_link(groups, kb_demo):
    user = sso_sign_in(claims(stakeholder_id="KB-P-003"))
    assert StakeholderLogin.objects.get(user=user).stakeholder_id == "KB-P-003"
    assert not user.is_staff, "a stakeholder with no operator group is not staff"
    sso_sign_in(claims(stakeholder_id="KB-P-004"))
    assert StakeholderLogin.objects.get(user=user).stakeholder_id == "KB-P-004"
    sso_sign_in(claims(stakeholder_id="", groups=["hb-auditors"]))
    assert not StakeholderLogin.objects.filter(user=user).exists()
    # A stakeholder another login already acts as stays with it.
    other = get_user_model().objects.create_user("someone-else")
    StakeholderLogin.objects.create(user=other, stakeholder_id="KB-P-005")
    sso_sign_in(claims(stakeholder_id="KB-P-005", groups=["hb-auditors"]))
    assert StakeholderLogin.objects.get(stakeholder_id="KB-P-005").user == other
    note = (
        AuditEvent.objects.filter(action=AuditEvent.Action.SSO_SIGNED_IN)
        .order_by("pk")
        .last()
        .detail
    )
    assert "linked to another login" in note
    links = AuditEvent.objects.filter(action=AuditEvent.Action.STAKEHOLDER_LINK_CHANGED).count()
    assert links == 3


@override_settings(**SSO)
@pytest.mark.parametrize(
    ("userinfo", "reason"),
    [
        ({"groups": ["sales"]}, "no_role"),
        ({"stakeholder_id": "KB-NOBODY"}, "no_role"),
        ({"sub": "", "groups": ["hb-operators"]}, "no_subject"),
    ],
)
def test_claims_that_give_nothing_are_refused(groups, kb_demo, userinfo, reason):
    with pytest.raises(SsoRefused) as refused:
        sso_sign_in(Claims.read(ISSUER, {"sub": "sub-9", **userinfo}))
    assert refused.value.reason == reason
    assert not SsoIdentity.objects.exists()


@override_settings(**SSO)
def test_a_deactivated_login_stays_out(groups):
    user = sso_sign_in(claims(groups=["hb-operators"]))
    user.is_active = False
    user.save()
    with pytest.raises(SsoRefused) as refused:
        sso_sign_in(claims(groups=["hb-operators"]))
    assert refused.value.reason == "inactive"


# The ID token: what mozilla-django-oidc checks (signature, algorithm, expiry, nonce) and what we
# add (issuer, audience, authorized party).


@pytest.fixture(scope="module")
def provider_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def id_token(key, **overrides) -> str:
    now = int(time.time())
    payload = {
        "iss": ISSUER,
        "aud": CLIENT_ID,
        "sub": "sub-1",
        "iat": now,
        "exp": now + 300,
        "nonce": "n-1",
        **overrides,
    }
    payload = {name: value for name, value in payload.items() if value is not None}
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": "k1"})


def backend_for(provider_key) -> SsoBackend:
    public = provider_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with override_settings(OIDC_RP_IDP_SIGN_KEY=public.decode()):
        return SsoBackend()


@override_settings(**SSO)
def test_a_right_id_token_is_accepted(provider_key):
    payload = backend_for(provider_key).verify_token(id_token(provider_key), nonce="n-1")
    assert payload["sub"] == "sub-1"
    both = id_token(provider_key, aud=[CLIENT_ID, "reports"], azp=CLIENT_ID)
    assert backend_for(provider_key).verify_token(both, nonce="n-1")["azp"] == CLIENT_ID


@override_settings(**SSO)
@pytest.mark.parametrize(
    "overrides",
    [
        {"iss": "https://evil.example"},
        {"iss": None},
        {"aud": "another-client"},
        {"aud": [CLIENT_ID, "reports"]},  # more than one audience and no azp
        {"aud": [CLIENT_ID, "reports"], "azp": "reports"},
        {"exp": int(time.time()) - 600},
        {"nonce": "n-other"},
    ],
    ids=["issuer", "no-issuer", "audience", "two-audiences", "azp", "expired", "nonce"],
)
def test_a_wrong_id_token_is_refused(provider_key, overrides):
    with pytest.raises((SuspiciousOperation, jwt.PyJWTError)):
        backend_for(provider_key).verify_token(id_token(provider_key, **overrides), nonce="n-1")


@override_settings(**SSO)
def test_a_token_signed_with_the_client_secret_is_refused(provider_key):
    forged = jwt.encode(
        {"iss": ISSUER, "aud": CLIENT_ID, "sub": "x", "nonce": "n-1", "exp": time.time() + 60},
        "sso-unit-test-secret-padded-to-32-bytes",
        algorithm="HS256",
    )
    with pytest.raises(SuspiciousOperation):
        backend_for(provider_key).verify_token(forged, nonce="n-1")


@override_settings(**SSO)
def test_an_unreachable_provider_is_a_refusal_not_a_500(db, provider_key):
    request = RequestFactory().get("/oidc/callback/", {"code": "c-1", "state": "s-1"})
    assert backend_for(provider_key).authenticate(request, nonce="n", code_verifier="v") is None
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_REFUSED)
    assert event.detail == "provider_or_token: ConnectionError"
    assert "c-1" not in repr(event.__dict__)


def test_a_password_login_is_not_the_backends_business(db, provider_key):
    request = RequestFactory().post("/admin/login/")
    assert SsoBackend().authenticate(request, username="a", password="b") is None


# The pages.


def test_without_single_sign_on_its_pages_are_not_there(client, db):
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "c", "state": "s"}).status_code == 404
    page = client.get("/oauth/login/").content.decode()
    assert 'id="sso-sign-in"' not in page and 'id="login-form"' in page


@override_settings(**SSO)
def test_the_login_pages_offer_the_company_sign_in(client, db):
    for path in ("/oauth/login/?next=/oauth/agents/", "/admin/login/?next=/admin/"):
        page = client.get(path).content.decode()
        assert 'id="sso-sign-in"' in page, path
        assert 'id="login-form"' in page, "local login stays unless switched off"
    started = client.get("/oidc/authenticate/", {"next": "/oauth/agents/"})
    assert started.status_code == 302
    assert started["Location"].startswith(f"{ISSUER}/auth?")
    assert "code_challenge_method=S256" in started["Location"]


@override_settings(**SSO, LOCAL_LOGIN_ENABLED=False)
def test_with_local_login_off_no_password_form_is_offered(client, db):
    page = client.get("/admin/login/").content.decode()
    assert 'id="sso-sign-in"' in page and 'id="login-form"' not in page


@override_settings(**SSO)
def test_a_callback_this_browser_never_started_returns_to_the_login_page(client, db):
    answer = client.get("/oidc/callback/", {"code": "c-2", "state": "never-started"})
    assert answer.status_code == 302 and answer["Location"].startswith("/oauth/login/")
    answer = client.get("/oidc/callback/", {"error": "access_denied", "state": "x"})
    assert answer.status_code == 302
    details = list(
        AuditEvent.objects.filter(action=AuditEvent.Action.SSO_REFUSED).values_list(
            "detail", flat=True
        )
    )
    assert sorted(details) == ["provider_error: access_denied", "state_unknown"]


PRINT_BACKENDS = (
    "shell",
    "-c",
    "from django.conf import settings; print(settings.AUTHENTICATION_BACKENDS)",
)


def _settings_in_a_new_process(*command: str, **env) -> str:
    """A manage.py command (printing the backends unless told) in a new process with this
    environment, as a server would start with it."""
    result = subprocess.run(
        [sys.executable, "manage.py", *(command or PRINT_BACKENDS)],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result.stdout + result.stderr


@pytest.mark.slow
def test_switching_local_login_off_takes_the_password_backend_away():
    on = _settings_in_a_new_process()
    assert "django.contrib.auth.backends.ModelBackend" in on
    off = _settings_in_a_new_process(
        LOCAL_LOGIN_ENABLED="false",
        OIDC_RP_CLIENT_ID="hyperbook",
        OIDC_RP_CLIENT_SECRET="s",
        OIDC_OP_ISSUER=ISSUER,
        OIDC_OP_AUTHORIZATION_ENDPOINT=f"{ISSUER}/auth",
        OIDC_OP_TOKEN_ENDPOINT=f"{ISSUER}/token",
        OIDC_OP_USER_ENDPOINT=f"{ISSUER}/me",
        OIDC_OP_JWKS_ENDPOINT=f"{ISSUER}/jwks",
    )
    assert "ModelBackend" not in off and "signin.sso.SsoBackend" in off
    nobody = _settings_in_a_new_process("check", LOCAL_LOGIN_ENABLED="false")
    assert "hyperbook.E002" in nobody


def test_the_start_up_checks_name_what_is_missing():
    with override_settings(LOCAL_LOGIN_ENABLED=False, SSO_ENABLED=False):
        assert [error.id for error in check_sign_in_methods()] == ["hyperbook.E002"]
    with override_settings(**{**SSO, "OIDC_OP_JWKS_ENDPOINT": "", "OIDC_RP_CLIENT_SECRET": None}):
        (error,) = check_sign_in_methods()
        assert error.id == "hyperbook.E003"
        assert "OIDC_OP_JWKS_ENDPOINT" in error.msg and "OIDC_RP_CLIENT_SECRET" in error.msg
    with override_settings(**SSO, OIDC_RP_SIGN_ALGO="HS256"):
        assert [error.id for error in check_sign_in_methods()] == ["hyperbook.E004"]
    with override_settings(**SSO):
        assert check_sign_in_methods() == []
