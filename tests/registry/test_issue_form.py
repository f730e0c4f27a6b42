"""Issuing a token through the admin: Post/Redirect/Get (a reload neither shows nor issues the
token again), tools chosen from the servers' allowlists, an expiry within the maximum, and each
error beside its field."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.declarations import KB_TOOL_NAME, validate_mcp_server
from registry.issued_tokens import COOKIE_NAME
from registry.models import TokenDelegation
from registry.services import server_save
from tests.registry.conftest import custom_python_declaration, kb_declaration

pytestmark = pytest.mark.django_db

ADD = "/admin/registry/tokendelegation/add/"


@pytest.fixture
def servers():
    from kb.models import Branch, Stakeholder

    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )
    server_save(declaration=validate_mcp_server(kb_declaration("kb_mcp")))
    server_save(declaration=validate_mcp_server(custom_python_declaration("rag")))
    off = custom_python_declaration("off_server", "http://127.0.0.1:9/mcp", enabled=False)
    off["tool_allowlist"] = off["default_tool"] = "off.tool"
    off["tool_allowlist"] = ["off.tool"]
    server_save(declaration=validate_mcp_server(off))


@pytest.fixture
def admin(servers):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))
    return client


def terms(**overrides):
    expires = timezone.localtime() + timedelta(days=3)
    return {
        "stakeholder": "KB-P-001",
        "agent_name": "claude desktop",
        "tools": [KB_TOOL_NAME],
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M"),
        **overrides,
    }


def token_on(body: str) -> str | None:
    match = re.search(r'id="issued-token"[^>]*>([^<]+)<', body)
    return match.group(1) if match else None


def error_beside(body: str, field: str) -> str:
    """The error list in the same form row as the field named `field`."""
    rows = re.findall(
        r'<div class="form-row">(.*?)(?=<div class="form-row">|</fieldset>)', body, re.S
    )
    row = next(row for row in rows if f'name="{field}"' in row)
    match = re.search(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', row, re.S)
    return match.group(1) if match else ""


def test_issuing_redirects_to_a_page_that_shows_the_token_once(admin):
    response = admin.post(ADD, terms())
    assert response.status_code == 303
    delegation = TokenDelegation.objects.get()
    assert response["Location"] == f"/admin/registry/tokendelegation/{delegation.pk}/issued/"
    # The hand-over cookie is sealed: the token is not readable in it.
    cookie = response.cookies[COOKIE_NAME]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert cookie["path"] == response["Location"]

    shown = admin.get(response["Location"])
    token = token_on(shown.content.decode())
    assert token and token not in cookie.value
    assert "no-store" in shown["Cache-Control"]
    assert "새로 고치거나 뒤로" in shown.content.decode()

    again = admin.get(response["Location"])
    body = again.content.decode()
    assert again.status_code == 410
    assert token_on(body) is None and token not in body
    assert 'id="token-gone"' in body
    assert TokenDelegation.objects.count() == 1


def test_a_hand_over_is_only_good_for_its_issuer_and_its_delegation(admin, servers):
    response = admin.post(ADD, terms())
    sealed = response.cookies[COOKIE_NAME].value
    delegation = TokenDelegation.objects.get()
    other = Client()
    other.force_login(User.objects.create_superuser("other", password="pw-for-tests-only"))
    other.cookies[COOKIE_NAME] = sealed
    # Someone else's delegation is no page of theirs at all.
    assert other.get(response["Location"]).status_code == 404
    # The same cookie offered for another delegation of the issuer's shows nothing.
    second = admin.post(ADD, terms(agent_name="second"))
    admin.cookies[COOKIE_NAME] = sealed
    admin.cookies[COOKIE_NAME]["path"] = second["Location"]
    body = admin.get(second["Location"]).content.decode()
    assert token_on(body) is None
    assert delegation.pk != TokenDelegation.objects.get(agent_name="second").pk


def test_a_tampered_hand_over_shows_nothing(admin):
    response = admin.post(ADD, terms())
    admin.cookies[COOKIE_NAME] = response.cookies[COOKIE_NAME].value[:-4] + "AAAA"
    admin.cookies[COOKIE_NAME]["path"] = response["Location"]
    shown = admin.get(response["Location"])
    assert shown.status_code == 410 and token_on(shown.content.decode()) is None


def test_the_tools_are_checkboxes_of_the_enabled_servers_allowlists(admin):
    form = admin.get(ADD).content.decode()
    boxes = re.findall(r'<input type="checkbox" name="tools" value="([^"]+)"[^>]*>', form)
    assert sorted(boxes) == sorted([KB_TOOL_NAME, "rag.search"])
    assert re.search(rf'value="{re.escape(KB_TOOL_NAME)}"[^>]*checked', form)
    assert "off.tool" not in form


@pytest.mark.parametrize("tool", ["rm.rf", "off.tool", "<script>x</script>"])
def test_a_tool_on_no_enabled_servers_allowlist_is_refused_beside_its_field(admin, tool):
    response = admin.post(ADD, terms(tools=[KB_TOOL_NAME, tool]))
    assert response.status_code == 200
    body = response.content.decode()
    assert not TokenDelegation.objects.exists()
    assert "허용 도구 목록에도 없습니다" in error_beside(body, "tools")
    assert "<script>x</script>" not in body
    # What was typed is kept: the stakeholder and the agent's name are still filled in.
    assert 'value="claude desktop"' in body


def test_the_expiry_is_a_local_date_picker_that_shows_its_maximum(admin, settings):
    settings.DELEGATION_MAX_LIFETIME_DAYS = 10
    form = admin.get(ADD).content.decode()
    field = re.search(r'<input type="datetime-local" name="expires_at"[^>]*>', form).group(0)
    latest = timezone.localtime() + timedelta(days=10)
    assert f'max="{latest.strftime("%Y-%m-%d")}' in field
    assert "Asia/Seoul" in form and "10일" in form

    too_late = (latest + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    response = admin.post(ADD, terms(expires_at=too_late))
    assert "최대 10일" in error_beside(response.content.decode(), "expires_at")
    assert not TokenDelegation.objects.exists()


def test_an_expiry_in_the_local_time_zone_is_kept_as_that_instant(admin):
    wall = (timezone.localtime() + timedelta(days=2)).replace(second=0, microsecond=0)
    response = admin.post(ADD, terms(expires_at=wall.strftime("%Y-%m-%dT%H:%M")))
    assert response.status_code == 303
    assert TokenDelegation.objects.get().expires_at == wall
