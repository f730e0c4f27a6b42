"""What the admin keeps of who may do what, and what its pages allow a browser to run."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.utils import timezone

from audit.access import access_change_record, user_access_snapshot
from audit.api_tokens import api_token_issue, api_token_revoke
from audit.models import AuditEvent
from core.groups import ensure_default_groups
from registry.models import McpServer

pytestmark = pytest.mark.django_db


def later(days=1):
    return timezone.now() + timedelta(days=days)


# --- API tokens ----------------------------------------------------------------------------------


def test_issuing_an_api_token_is_audited_without_the_token(capsys):
    siem = User.objects.create_user("siem", is_staff=True)
    call_command("create_api_token", "--user", "siem", "--label", "pull")
    token = capsys.readouterr().out.strip()
    event = AuditEvent.objects.get(action="core.api_token_issued")
    assert event.actor == "system"
    assert event.changes["after"]["user"] == "siem" == siem.username
    assert token.startswith("hbapi_") and token not in repr(event.changes)


def test_revoking_an_api_token_is_audited_once():
    admin = User.objects.create_superuser("root", password="x-for-tests")
    record, _ = api_token_issue(user=admin, label="x", expires_at=later())
    assert api_token_revoke(token=record, actor=admin) is True
    assert api_token_revoke(token=record, actor=admin) is False
    (event,) = AuditEvent.objects.filter(action="core.api_token_revoked")
    assert (event.actor, event.changes["before"]["revoked_at"]) == ("root", None)
    assert event.changes["after"]["revoked_at"] is not None


# --- users' and groups' rights -------------------------------------------------------------------


def test_a_change_of_rights_is_one_event_and_no_change_is_none():
    user = User.objects.create_user("someone", is_staff=True)
    before = user_access_snapshot(user)
    user.groups.add(Group.objects.get(name="mcp_admins"))
    event = access_change_record(
        kind="user", target="user:someone", before=before, after=user_access_snapshot(user),
        actor=None,
    )  # fmt: skip
    assert event.action == "auth.user_changed"
    assert event.changes["after"]["groups"] == ["mcp_admins"]
    same = user_access_snapshot(user)
    assert access_change_record(
        kind="user", target="user:someone", before=same, after=same, actor=None
    ) is None  # fmt: skip


def test_a_group_permission_change_in_the_admin_is_audited(client):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    group = Group.objects.create(name="readers")
    response = client.post(
        f"/admin/auth/group/{group.pk}/change/", {"name": "readers", "permissions": []}
    )
    assert response.status_code == 302
    assert not AuditEvent.objects.filter(action="auth.group_changed").exists()  # nothing changed
    permission = group.permissions.model.objects.get(codename="use_console")
    client.post(
        f"/admin/auth/group/{group.pk}/change/",
        {"name": "readers", "permissions": [permission.pk]},
    )
    event = AuditEvent.objects.get(action="auth.group_changed", target="group:readers")
    assert event.changes["after"]["permissions"] == ["registry.use_console"]


def test_the_groups_hold_the_console_and_pin_rights_as_the_readme_says():
    ensure_default_groups()
    admins = Group.objects.get(name="mcp_admins").permissions
    auditors = Group.objects.get(name="auditors").permissions
    for codename in ("use_console", "approve_toolpin"):
        assert admins.filter(codename=codename).exists()
        assert not auditors.filter(codename=codename).exists()
    # Auditors only read: views, and the access page's explanation of what a stakeholder sees.
    assert list(
        auditors.exclude(codename__startswith="view_").values_list("codename", flat=True)
    ) == ["explain_access"]


def test_migrate_takes_back_a_right_added_to_a_product_group_by_hand():
    auditors = Group.objects.get(name="auditors")
    auditors.permissions.add(auditors.permissions.model.objects.get(codename="use_console"))
    ensure_default_groups()
    assert not auditors.permissions.filter(codename="use_console").exists()


# --- what the server form offers -----------------------------------------------------------------


def test_the_server_form_never_offers_a_users_bearer(client):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    page = client.get("/admin/registry/mcpserver/add/").content.decode()
    select = re.search(r'<select name="auth_delivery".*?</select>', page, re.S).group(0)
    assert 'value="none" selected' in select
    assert "per_request_vpd_bearer" not in select


def test_a_posted_users_bearer_for_a_third_party_server_is_refused(client):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    data = {
        "server_id": "thirdparty",
        "enabled": "on",
        "provider": "custom_python",
        "transport": "streamable_http",
        "auth_delivery": "per_request_vpd_bearer",
        "endpoint_url": "http://127.0.0.1:9/mcp",
        "default_tool": "rag.search",
        "router_mode": "direct",
        "timeout_seconds_env": "POC3_MCP_TIMEOUT_SECONDS",
        "allowed_tools-TOTAL_FORMS": "1",
        "allowed_tools-INITIAL_FORMS": "0",
        "allowed_tools-MIN_NUM_FORMS": "0",
        "allowed_tools-MAX_NUM_FORMS": "1000",
        "allowed_tools-0-tool_name": "rag.search",
    }
    response = client.post("/admin/registry/mcpserver/add/", data)
    assert response.status_code == 200
    assert not McpServer.objects.filter(server_id="thirdparty").exists()


def test_an_mcp_admin_deletes_a_server_with_its_pins_and_it_is_audited(client, settings):
    from registry import pinning
    from registry.declarations import validate_mcp_server
    from registry.models import ToolPin
    from registry.services import server_save
    from tests.registry.conftest import kb_declaration
    from tests.registry.fault_server import kb_tool

    server, _ = server_save(declaration=validate_mcp_server(kb_declaration("pinned_kb")))
    pinning.tool_pin_check(
        server=server, tool_name=kb_tool()["name"], definition=kb_tool(), trust_first_use=True
    )
    admin = User.objects.create_user("mcp-admin", password="x-for-tests", is_staff=True)
    admin.groups.add(Group.objects.get(name="mcp_admins"))
    client.force_login(admin)
    url = f"/admin/registry/mcpserver/{server.pk}/delete/"
    assert client.get(url).status_code == 200
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not McpServer.objects.filter(pk=server.pk).exists()
    assert not ToolPin.objects.filter(server_id=server.pk).exists()
    event = AuditEvent.objects.get(action="registry.server_deleted", target="pinned_kb")
    assert (event.actor, event.changes["after"]) == ("mcp-admin", None)


# --- the admin's pages ---------------------------------------------------------------------------


def test_every_admin_page_carries_a_policy_without_inline_script(client):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    for url in ("/admin/", "/admin/registry/consoleturn/", "/admin/audit/auditevent/"):
        response = client.get(url)
        policy = response["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'"
        assert "unsafe-inline" not in policy
        assert directives["frame-ancestors"] == "'none'"
        page = response.content.decode()
        assert directives["style-src"] == "'self'"
        # Every inline script is a data island (no code); no page needs an inline style.
        for script in re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page, re.S):
            assert not script.strip(), url
        assert "<style" not in page and " style=" not in page, url


def test_an_admin_session_ends_after_the_idle_timeout(client, settings):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    assert settings.SESSION_COOKIE_AGE == 30 * 60 and settings.SESSION_SAVE_EVERY_REQUEST
    response = client.get("/admin/")
    assert response.status_code == 200
    assert response.cookies["sessionid"]["max-age"] == 30 * 60  # moved on by this request
    session = client.session
    session.set_expiry(-1)  # as if 30 idle minutes had passed
    session.save()
    assert client.get("/admin/").status_code == 302  # back to the login page


def test_a_superuser_setting_another_users_password_is_audited_without_it(client):
    client.force_login(User.objects.create_superuser("root", password="x-for-tests"))
    planner = User.objects.create_user("planner", password="old-pw-for-tests", is_staff=True)
    new_password = "N3w-Passw0rd-Canary-7731"
    response = client.post(
        f"/admin/auth/user/{planner.pk}/password/",
        {"password1": new_password, "password2": new_password, "usable_password": "true"},
    )
    assert response.status_code == 302
    planner.refresh_from_db()
    assert planner.check_password(new_password)
    event = AuditEvent.objects.get(action="auth.user_password_set")
    assert (event.actor, event.target) == ("root", "user:planner")
    assert event.changes["after"] == {"usable_password": True}
    stored = repr(list(AuditEvent.objects.values()))
    assert new_password not in stored and planner.password not in stored
