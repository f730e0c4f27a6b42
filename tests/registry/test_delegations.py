import re
import stat
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from core.tokens import token_fingerprint
from kb.models import Branch, Stakeholder
from registry.models import TokenDelegation
from registry.presets import PresetFileError, read_token_presets
from registry.services import (
    DelegationError,
    delegation_issue,
    delegation_register,
    delegation_revoke,
)
from registry.tokens import MalformedToken, bearer_from_header, normalize_token

pytestmark = pytest.mark.django_db

EXTERNAL_CANARY = "EXTcanary9Vq3Lm7Xz2Rt5Pw8Ks1Hd4Jf6"


@pytest.fixture
def planner(kb_registered):
    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    return Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))
    return client


@pytest.fixture
def kb_registered():
    """The KB server, whose allowlist is what a delegation may choose from."""
    from registry.declarations import validate_mcp_server
    from registry.services import server_save
    from tests.registry.conftest import kb_declaration

    server, _ = server_save(declaration=validate_mcp_server(kb_declaration("kb_mcp")))
    return server


def later(days=1):
    return timezone.now() + timedelta(days=days)


def test_an_issued_token_is_kept_only_as_a_keyed_fingerprint(planner):
    delegation, token = delegation_issue(
        stakeholder=planner, agent_name="claude", expires_at=later()
    )
    assert token.startswith("hbvpd_") and len(token) > 40
    assert delegation.fingerprint == token_fingerprint(token)
    assert token not in str(TokenDelegation.objects.filter(pk=delegation.pk).values().get())
    assert token not in str(delegation)
    assert delegation.display_prefix == token[:10]


def test_the_fingerprint_depends_on_the_key(planner, settings):
    first = token_fingerprint("hbvpd_sample-token-value-000000")
    settings.TOKEN_FINGERPRINT_KEY = "another-key-entirely-0123456789"
    assert token_fingerprint("hbvpd_sample-token-value-000000") != first


def test_expiry_is_required_in_the_future_and_bounded(planner, settings):
    with pytest.raises(DelegationError):
        delegation_issue(stakeholder=planner, agent_name="a", expires_at=timezone.now())
    with pytest.raises(DelegationError):
        delegation_issue(
            stakeholder=planner,
            agent_name="a",
            expires_at=later(settings.DELEGATION_MAX_LIFETIME_DAYS + 1),
        )


def test_registering_an_external_token_normalises_it_and_stores_no_raw_value(planner):
    delegation = delegation_register(
        raw_token=f"  Bearer {EXTERNAL_CANARY} ",
        stakeholder=planner,
        agent_name="vs code",
        expires_at=later(),
    )
    assert delegation.fingerprint == token_fingerprint(EXTERNAL_CANARY)
    assert EXTERNAL_CANARY not in str(TokenDelegation.objects.values().get(pk=delegation.pk))
    with pytest.raises(DelegationError):
        delegation_register(
            raw_token=EXTERNAL_CANARY, stakeholder=planner, agent_name="again", expires_at=later()
        )


def test_a_malformed_external_token_is_refused_without_echoing_it(planner):
    with pytest.raises(DelegationError) as raised:
        delegation_register(
            raw_token="short<secret>", stakeholder=planner, agent_name="x", expires_at=later()
        )
    assert "short<secret>" not in str(raised.value)


def test_revoking_needs_a_reason_and_happens_once(planner):
    delegation, _ = delegation_issue(stakeholder=planner, agent_name="a", expires_at=later())
    with pytest.raises(DelegationError):
        delegation_revoke(delegation=delegation, reason="  ")
    assert delegation_revoke(delegation=delegation, reason="lost laptop") is True
    assert delegation_revoke(delegation=delegation, reason="again") is False
    assert delegation.revoked_reason == "lost laptop"
    assert delegation.state(now=timezone.now()) == "revoked"


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer hbvpd_abcdefghijklmnop", True),
        ("bearer hbvpd_abcdefghijklmnop", True),
        ("Bearer   hbvpd_abcdefghijklmnop  ", True),
        ("Bearer", False),
        ("Bearer short", False),
        ("Basic hbvpd_abcdefghijklmnop", False),
        ("Bearer hbvpd_abcdefghijklmnop extra", False),
        (None, False),
    ],
)
def test_bearer_headers_are_parsed_strictly(header, ok):
    if ok:
        assert bearer_from_header(header) == "hbvpd_abcdefghijklmnop"
    else:
        with pytest.raises(MalformedToken):
            bearer_from_header(header)


def test_normalize_token_strips_a_bearer_prefix():
    assert normalize_token(" Bearer hbvpd_abcdefghijklmnop\n") == "hbvpd_abcdefghijklmnop"


def test_the_admin_shows_an_issued_token_once_and_never_again(planner, admin_client):
    response = admin_client.post(
        "/admin/registry/tokendelegation/add/",
        {
            "stakeholder": planner.pk,
            "agent_name": "claude desktop",
            "tools": "ords.query.kb_select_ai_vpd",
            "expires_at_0": (timezone.localtime() + timedelta(days=3)).strftime("%Y-%m-%d"),
            "expires_at_1": "12:00:00",
            "expires_at": (timezone.localtime() + timedelta(days=3)).strftime("%Y-%m-%d 12:00:00"),
        },
        follow=True,
    )
    body = response.content.decode()
    assert response.status_code == 200, body[:3000]
    assert response.redirect_chain[0][1] == 303
    assert "다시 표시되지 않습니다" in body
    assert "no-store" in response["Cache-Control"]
    token = re.search(r'id="issued-token"[^>]*>([^<]+)<', body).group(1)
    delegation = TokenDelegation.objects.get()
    assert delegation.fingerprint == token_fingerprint(token)
    for page in (
        "/admin/registry/tokendelegation/",
        f"/admin/registry/tokendelegation/{delegation.pk}/change/",
        "/admin/registry/tokendelegation/?q=claude",
    ):
        shown = admin_client.get(page)
        assert shown.status_code == 200
        assert token not in shown.content.decode()


def test_the_admin_registers_an_external_token_from_a_password_field(planner, admin_client):
    form = admin_client.get("/admin/registry/tokendelegation/register/").content.decode()
    assert 'type="password"' in form
    response = admin_client.post(
        "/admin/registry/tokendelegation/register/",
        {
            "stakeholder": planner.pk,
            "agent_name": "external agent",
            "tools": "ords.query.kb_select_ai_vpd",
            "expires_at": (timezone.localtime() + timedelta(days=3)).strftime("%Y-%m-%d 12:00:00"),
            "token": EXTERNAL_CANARY,
        },
        follow=True,
    )
    assert response.status_code == 200
    assert EXTERNAL_CANARY not in response.content.decode()
    assert TokenDelegation.objects.get().fingerprint == token_fingerprint(EXTERNAL_CANARY)


def test_the_admin_revokes_with_a_reason(planner, admin_client):
    delegation, _ = delegation_issue(stakeholder=planner, agent_name="a", expires_at=later())
    response = admin_client.post(
        f"/admin/registry/tokendelegation/{delegation.pk}/revoke/", {"reason": "퇴사"}
    )
    assert response.status_code == 302
    delegation.refresh_from_db()
    assert delegation.revoked_reason == "퇴사"
    listing = admin_client.get("/admin/registry/tokendelegation/?state=revoked").content.decode()
    assert delegation.display_prefix in listing


def test_demo_delegations_write_an_owner_only_preset_file_and_are_idempotent(planner, tmp_path):
    path = tmp_path / "presets.json"
    call_command("issue_demo_delegations", output=str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    presets = read_token_presets(path)
    assert set(presets) == {"KB-P-001"}
    call_command("issue_demo_delegations", output=str(path))
    assert read_token_presets(path) == presets
    assert TokenDelegation.objects.count() == 1


def test_a_preset_file_readable_by_others_is_refused(tmp_path):
    path = tmp_path / "presets.json"
    path.write_text('{"KB-P-001": "hbvpd_x"}')
    path.chmod(0o644)
    with pytest.raises(PresetFileError, match="chmod 600"):
        read_token_presets(path)


# --- external tokens must be strong --------------------------------------------------------------


@pytest.mark.parametrize(
    "weak",
    [
        "aaaaaaaaaaaaaaaa",  # the reported one: 16 × the same letter
        "0123456789abcdef",  # 64 bits of hexadecimal
        "0123456789abcdef0123456789abcdef",  # enough length, but a piece repeated
        "abcdefghabcdefghabcdefghabcdefghabcd",  # ditto, in letters
        "Zz1" + "a" * 40,  # one character is most of it
        "1234567890123456789012345678901234567",  # 37 digits: 123 bits
        "abc1abc2abc3ab",  # short
    ],
)
def test_a_weak_external_token_is_refused(planner, weak):
    with pytest.raises(DelegationError) as caught:
        delegation_register(raw_token=weak, stakeholder=planner, agent_name="x", expires_at=later())
    assert weak not in str(caught.value)
    assert not TokenDelegation.objects.exists()


@pytest.mark.parametrize("size", [16, 24])
def test_random_tokens_of_128_bits_are_accepted(planner, size):
    import secrets

    for strong in (secrets.token_hex(size), secrets.token_urlsafe(size)):
        delegation_register(
            raw_token=strong, stakeholder=planner, agent_name="x", expires_at=later()
        )
    assert TokenDelegation.objects.count() == 2


def test_the_strength_rule_counts_length_and_alphabet():
    from registry.tokens import token_strength_bits

    assert token_strength_bits("0" * 39) == pytest.approx(39 * 3.3219, rel=1e-3)
    assert token_strength_bits("a1" * 16) == 128  # hexadecimal: 4 bits a character
    assert token_strength_bits("z1" * 13) == pytest.approx(26 * 5.1699, rel=1e-3)
    assert token_strength_bits("Ab-" * 8) == 24 * 6


# --- audience ------------------------------------------------------------------------------------


def test_a_delegation_records_the_resource_it_is_for(planner, settings):
    settings.MCP_RESOURCE_URL = "https://kb.example/mcp"
    delegation, _ = delegation_issue(stakeholder=planner, agent_name="x", expires_at=later())
    assert delegation.audience == "https://kb.example/mcp"


def test_a_token_issued_for_another_resource_is_refused_here(planner, settings):
    from mcpserver.principals import authenticate_token

    settings.MCP_RESOURCE_URL = "https://staging.example/mcp"
    _, staging_token = delegation_issue(stakeholder=planner, agent_name="x", expires_at=later())
    settings.MCP_RESOURCE_URL = ""
    _, unbound_token = delegation_issue(stakeholder=planner, agent_name="y", expires_at=later())
    settings.MCP_RESOURCE_URL = "https://kb.example/mcp"
    refused = authenticate_token(staging_token)
    assert (refused.principal, refused.failure) == (None, "wrong_audience")
    assert authenticate_token(unbound_token).principal is not None
    settings.MCP_RESOURCE_URL = "https://staging.example/mcp"
    assert authenticate_token(staging_token).principal is not None


# --- secrets a server echoes ---------------------------------------------------------------------


def test_echoed_secrets_are_redacted_at_any_depth_in_keys_and_values():
    from core.redaction import redact_secrets

    known = "plainKnownToken0123456789"
    value = {
        "a": [{"b": f"Authorization: Bearer {known}"}],
        f"key {known}": "hbvpd_SomeOtherIssuedToken_abc",
        "c": "bearer abc.def-ghi",
        "n": 3,
    }
    redacted = redact_secrets(value, known=(known,))
    assert known not in repr(redacted) and "hbvpd_Some" not in repr(redacted)
    assert redacted["n"] == 3 and redacted["c"] == "[redacted]"


def test_a_value_nested_too_deeply_is_refused_not_walked():
    from core.redaction import TooDeeplyNested, redact_secrets

    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(TooDeeplyNested):
        redact_secrets(deep)
