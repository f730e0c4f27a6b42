"""Every admin and console action, tried as every kind of operator: the table below is the rule.

Each action is done for real through the admin (Django's test client) and judged by its effect:
a row written or removed, a request reaching the MCP server on loopback. An action refused must
leave no effect at all.
"""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.utils import timezone

from audit.api_tokens import api_token_issue
from audit.checkpoints import checkpoint_create_if_due
from audit.models import AuditCheckpoint, AuditEvent, ChainVerification
from kb.models import Branch, Stakeholder
from registry import pinning
from registry.declarations import validate_mcp_server
from registry.models import ConsoleTurn, McpServer, ServerCheck, TokenDelegation, ToolPin
from registry.presets import write_token_presets
from registry.services import delegation_issue, server_save
from tests.registry.conftest import custom_python_declaration, kb_declaration
from tests.registry.fault_server import FaultServer, kb_tool, serving
from tests.registry.test_admin import change_form_data

# Every action as every role, each in a fresh world: the full run holds it, not the quick loop.
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ROLES = ("superuser", "mcp_admin", "auditor", "staff_no_group", "view_consoleturn_only")
S, M, A = "superuser", "mcp_admin", "auditor"

# action -> the roles that may do it; every other role is refused and leaves no trace.
MATRIX = {
    "console.open": {S, M},
    "console.discover": {S, M},
    "console.call": {S, M},
    "console.compare": {S, M},
    "console.read_own_turn": {S, M},
    "console.read_others_turn": {S},  # and it is audited
    "console.delete_own_history": {S, M},
    "console.download_own_answer": {S, M},
    "server.view": {S, M, A},
    "server.add": {S, M},
    "server.change": {S, M},
    "server.delete": {S, M},
    "server.check_now": {S, M},  # a service check: no user's bearer
    "delegation.view": {S, M, A},
    "delegation.issue": {S, M},
    "delegation.register": {S, M},
    "delegation.revoke": {S, M},
    "delegation.renew": {S, M},
    "delegation.bulk_revoke": {S, M},
    "delegation.explain_access": {S, M, A},
    "pin.view": {S, M, A},
    "pin.approve": {S, M},
    "audit.view": {S, M, A},
    "audit.export": {S, M, A},  # and it is audited
    "audit.prove": {S, M, A},  # and it is audited
    "audit.change": set(),
    "audit.delete": set(),
    "audit.verify": {S, M, A},  # queued for a worker
    "audit.verify_full": {S, M, A},  # the same, rate-limited
    "checkpoint.view": {S, M, A},
    "checkpoint.delete": set(),
    "checkpoint.api": {S, M, A},
    "proof.inclusion": {S, M, A},
    "proof.consistency": {S, M, A},
    "api_token.view": {S},
    "api_token.revoke": {S},
    "api_token.reassign": set(),
    "user.change_groups": {S},
}

# Actions of a change list: to a user who may not, the list offers no such action at all.
LIST_ACTIONS = {"delegation.bulk_revoke"}

PLANNER_TOKEN = "hbvpd_" + "MatrixPresetToken0123456789abcdefghijkl"
MANAGER_TOKEN = "hbvpd_" + "MatrixManagerToken0123456789abcdefghijk"
OTHERS_PROMPT = "다른 관리자의 질문입니다"


class World:
    """Everything an action needs, made fresh for each case."""

    def __init__(self, fault, tmp_path, settings):
        self.fault = fault
        branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
        self.planner = Stakeholder.objects.create(
            stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
        )
        Stakeholder.objects.create(
            stakeholder_id="KB-M-001", name="관리자", role="branch_manager", branch=branch
        )
        presets = tmp_path / "presets.json"
        write_token_presets(presets, {"KB-P-001": PLANNER_TOKEN, "KB-M-001": MANAGER_TOKEN})
        settings.VPD_TOKEN_PRESETS_FILE = presets
        settings.KB_MCP_BASE_URL = fault.url
        self.kb, _ = server_save(declaration=validate_mcp_server(kb_declaration("kb_mcp")))
        self.spare, _ = server_save(
            declaration=validate_mcp_server(
                custom_python_declaration("spare", "http://127.0.0.1:9/mcp")
            )
        )
        pinning.tool_pin_check(
            server=self.kb, tool_name=kb_tool()["name"], definition=kb_tool(), trust_first_use=True
        )
        changed = {**kb_tool(), "title": "changed"}
        self.pin = pinning.tool_pin_check(
            server=self.kb, tool_name=changed["name"], definition=changed, trust_first_use=True
        ).pin
        self.delegation, _ = delegation_issue(
            stakeholder=self.planner, agent_name="agent", expires_at=later()
        )
        self.other_admin = User.objects.create_superuser("other-admin", password="x-for-tests")
        self.others_turn = turn_of(self.other_admin, OTHERS_PROMPT)
        self.auditor = User.objects.create_user("siem", is_staff=True)
        self.api_token, _ = api_token_issue(user=self.auditor, label="siem", expires_at=later())
        self.event = AuditEvent.objects.order_by("-sequence").first()
        self.checkpoint = checkpoint_create_if_due()

    def user(self, role: str) -> User:
        if role == "superuser":
            return User.objects.create_superuser("tried", password="x-for-tests")
        user = User.objects.create_user("tried", password="x-for-tests", is_staff=True)
        if role == "mcp_admin":
            user.groups.add(Group.objects.get(name="mcp_admins"))
        elif role == "auditor":
            user.groups.add(Group.objects.get(name="auditors"))
        elif role == "view_consoleturn_only":
            user.user_permissions.add(Permission.objects.get(codename="view_consoleturn"))
        return user


def later(days=1):
    return timezone.now() + timedelta(days=days)


def turn_of(user, prompt):
    return ConsoleTurn.objects.create(
        user=user, kind="call", server_id="kb_mcp", prompt=prompt, status="ok"
    )


def console(browser, world, action, prompt=""):
    return browser.post(
        "/admin/registry/consoleturn/",
        {
            "server": "kb_mcp",
            "stakeholder": "KB-P-001",
            "one_time_bearer": "",
            "prompt": prompt,
            "limit": "10",
            "action": action,
        },
    )


# Each action: (browser, world, user) -> (response, whether its effect happened).


def console_open(browser, world, user):
    response = browser.get("/admin/registry/consoleturn/")
    return response, b"console-form" in response.content


def console_discover(browser, world, user):
    response = console(browser, world, "discover")
    return response, bool(world.fault.rpc_requests("tools/list"))


def console_call(browser, world, user):
    response = console(browser, world, "call", prompt="담당 고객 목록")
    return response, bool(world.fault.rpc_requests("tools/call"))


def console_compare(browser, world, user):
    response = browser.post(
        "/admin/registry/consoleturn/",
        {
            "server": "kb_mcp",
            "stakeholder": "KB-P-001",
            "compare_with": "KB-M-001",
            "one_time_bearer": "",
            "prompt": "담당 고객 목록",
            "limit": "10",
            "action": "compare",
        },
    )
    return response, len(world.fault.rpc_requests("tools/call")) == 2


def console_read_own_turn(browser, world, user):
    turn = turn_of(user, "내 질문입니다")
    response = browser.get(f"/admin/registry/consoleturn/{turn.pk}/change/")
    return response, "내 질문입니다" in response.content.decode()


def console_read_others_turn(browser, world, user):
    response = browser.get(f"/admin/registry/consoleturn/{world.others_turn.pk}/change/")
    seen = OTHERS_PROMPT in response.content.decode()
    audited = AuditEvent.objects.filter(
        action="console.turn_viewed", target=f"console_turn:{world.others_turn.pk}"
    ).exists()
    assert seen == audited
    return response, seen


def console_download_own_answer(browser, world, user):
    turn = turn_of(user, "내려받을 답변")
    turn.rendered = {"columns": [{"name": "phone", "label": "전화번호"}], "rows": [["010-****-1"]]}
    turn.save(update_fields=["rendered"])
    response = browser.get(f"/admin/registry/consoleturn/{turn.pk}/csv/")
    downloaded = b"010-****-1" in response.content
    audited = AuditEvent.objects.filter(
        action="console.answer_downloaded", target=f"console_turn:{turn.pk}"
    ).exists()
    assert downloaded == audited
    return response, downloaded


def console_delete_own_history(browser, world, user):
    turn = turn_of(user, "지울 질문")
    response = browser.post("/admin/registry/consoleturn/delete/")
    gone = not ConsoleTurn.objects.filter(pk=turn.pk).exists()
    assert ConsoleTurn.objects.filter(pk=world.others_turn.pk).exists()  # never anyone else's
    return response, gone


def viewer(url):
    def view(browser, world, user):
        response = browser.get(url)
        return response, response.status_code == 200

    return view


def server_add(browser, world, user):
    data = {
        "server_id": "added",
        "enabled": "on",
        "provider": "custom_python",
        "transport": "streamable_http",
        "description": "",
        "base_url_env": "",
        "endpoint_path": "",
        "auth_delivery": "none",
        "endpoint_url": "http://127.0.0.1:9/mcp",
        "token_env": "",
        "default_tool": "rag.search",
        "router_mode": "direct",
        "timeout_seconds_env": "POC3_MCP_TIMEOUT_SECONDS",
        "timeout_seconds": "",
        "allowed_tools-TOTAL_FORMS": "1",
        "allowed_tools-INITIAL_FORMS": "0",
        "allowed_tools-MIN_NUM_FORMS": "0",
        "allowed_tools-MAX_NUM_FORMS": "1000",
        "allowed_tools-0-tool_name": "rag.search",
    }
    response = browser.post("/admin/registry/mcpserver/add/", data)
    return response, McpServer.objects.filter(server_id="added").exists()


def server_change(browser, world, user):
    data = change_form_data(world.spare, ["rag.search"], description="changed by the matrix")
    response = browser.post(f"/admin/registry/mcpserver/{world.spare.pk}/change/", data)
    world.spare.refresh_from_db()
    return response, world.spare.description == "changed by the matrix"


def server_delete(browser, world, user):
    response = browser.post(f"/admin/registry/mcpserver/{world.spare.pk}/delete/", {"post": "yes"})
    gone = not McpServer.objects.filter(pk=world.spare.pk).exists()
    if gone:
        event = AuditEvent.objects.get(action="registry.server_deleted", target="spare")
        assert event.changes["before"]["endpoint_url"] == "http://127.0.0.1:9/mcp"
    return response, gone


def server_check_now(browser, world, user):
    response = browser.post(f"/admin/registry/mcpserver/{world.kb.pk}/check/")
    return response, ServerCheck.objects.filter(server=world.kb).exists()


def delegation_terms():
    return {
        "stakeholder": "KB-P-001",
        "agent_name": "matrix-agent",
        "tools": "ords.query.kb_select_ai_vpd",
        "expires_at": later().strftime("%Y-%m-%d %H:%M:%S"),
    }


def delegation_issue_action(browser, world, user):
    response = browser.post("/admin/registry/tokendelegation/add/", delegation_terms())
    return response, TokenDelegation.objects.filter(agent_name="matrix-agent").exists()


def delegation_register_action(browser, world, user):
    data = {**delegation_terms(), "token": "EXTmatrix9Vq3Lm7Xz2Rt5Pw8Ks1Hd4Jf6Qa"}
    response = browser.post("/admin/registry/tokendelegation/register/", data)
    return response, TokenDelegation.objects.filter(agent_name="matrix-agent").exists()


def delegation_revoke_action(browser, world, user):
    url = f"/admin/registry/tokendelegation/{world.delegation.pk}/revoke/"
    response = browser.post(url, {"reason": "matrix"})
    world.delegation.refresh_from_db()
    return response, world.delegation.revoked_at is not None


def delegation_renew_action(browser, world, user):
    url = f"/admin/registry/tokendelegation/{world.delegation.pk}/renew/"
    expires = (timezone.localtime() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    response = browser.post(url, {"expires_at": expires})
    renewed = TokenDelegation.objects.filter(renews=world.delegation).exists()
    assert renewed == AuditEvent.objects.filter(action="registry.delegation_renewed").exists()
    return response, renewed


def delegation_bulk_revoke(browser, world, user):
    data = {
        "action": "revoke_selected",
        "_selected_action": [world.delegation.pk],
        "apply": "1",
        "reason": "matrix bulk",
    }
    response = browser.post("/admin/registry/tokendelegation/", data)
    world.delegation.refresh_from_db()
    revoked = world.delegation.revoked_at is not None
    if not revoked and response.status_code == 200:
        assert b'value="revoke_selected"' not in response.content
    return response, revoked


def delegation_explain_access(browser, world, user):
    response = browser.get("/admin/registry/tokendelegation/access/KB-P-001/")
    return response, 'id="access-summary"' in response.content.decode()


def pin_approve(browser, world, user):
    url = f"/admin/registry/toolpin/{world.pin.pk}/review/"
    response = browser.post(url, {"expected_hash": world.pin.pending_hash})
    return response, not ToolPin.objects.get(pk=world.pin.pk).is_held


def audit_export(browser, world, user):
    response = browser.get("/admin/audit/auditevent/export/?outcome__exact=changed")
    exported = response.status_code == 200 and b"audit_event" in b"".join(
        response.streaming_content if response.streaming else [response.content]
    )
    assert exported == AuditEvent.objects.filter(action="audit.exported").exists()
    return response, exported


def audit_prove(browser, world, user):
    response = browser.get(f"/admin/audit/auditevent/{world.event.pk}/proof/")
    proven = response.status_code == 200 and b"audit_event_proof" in response.content
    assert proven == AuditEvent.objects.filter(action="audit.exported").exists()
    return response, proven


def audit_change(browser, world, user):
    url = f"/admin/audit/auditevent/{world.event.pk}/change/"
    response = browser.post(url, {"actor": "someone else"})
    world.event.refresh_from_db()
    return response, world.event.actor == "someone else"


def audit_delete(browser, world, user):
    url = f"/admin/audit/auditevent/{world.event.pk}/delete/"
    response = browser.post(url, {"post": "yes"})
    return response, not AuditEvent.objects.filter(pk=world.event.pk).exists()


def audit_verify(full: bool):
    def verify(browser, world, user):
        response = browser.post("/admin/audit/auditevent/verify/", {"full": "1"} if full else {})
        queued = ChainVerification.objects.filter(requested_by=user.get_username(), full=full)
        return response, queued.exists()

    return verify


def checkpoint_delete(browser, world, user):
    url = f"/admin/audit/auditcheckpoint/{world.checkpoint.pk}/delete/"
    response = browser.post(url, {"post": "yes"})
    return response, not AuditCheckpoint.objects.filter(pk=world.checkpoint.pk).exists()


def api_token_revoke(browser, world, user):
    data = {"action": "revoke", "_selected_action": [world.api_token.pk]}
    response = browser.post("/admin/core/apitoken/", data)
    world.api_token.refresh_from_db()
    return response, world.api_token.revoked_at is not None


def api_token_reassign(browser, world, user):
    url = f"/admin/core/apitoken/{world.api_token.pk}/change/"
    response = browser.post(url, {"user": user.pk, "label": "mine now"})
    world.api_token.refresh_from_db()
    return response, world.api_token.user_id == user.pk


def user_change_groups(browser, world, user):
    target = world.auditor
    auditors = Group.objects.get(name="auditors")
    data = {
        "username": target.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "is_staff": "on",
        "groups": [auditors.pk],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }
    response = browser.post(f"/admin/auth/user/{target.pk}/change/", data)
    changed = target.groups.filter(name="auditors").exists()
    if changed:
        event = AuditEvent.objects.get(action="auth.user_changed", target="user:siem")
        assert (event.changes["before"]["groups"], event.changes["after"]["groups"]) == (
            [],
            ["auditors"],
        )
    return response, changed


ACTIONS = {
    "console.open": console_open,
    "console.discover": console_discover,
    "console.call": console_call,
    "console.compare": console_compare,
    "console.read_own_turn": console_read_own_turn,
    "console.read_others_turn": console_read_others_turn,
    "console.delete_own_history": console_delete_own_history,
    "console.download_own_answer": console_download_own_answer,
    "server.view": viewer("/admin/registry/mcpserver/"),
    "server.add": server_add,
    "server.change": server_change,
    "server.delete": server_delete,
    "server.check_now": server_check_now,
    "delegation.view": viewer("/admin/registry/tokendelegation/"),
    "delegation.issue": delegation_issue_action,
    "delegation.register": delegation_register_action,
    "delegation.revoke": delegation_revoke_action,
    "delegation.renew": delegation_renew_action,
    "delegation.bulk_revoke": delegation_bulk_revoke,
    "delegation.explain_access": delegation_explain_access,
    "pin.view": viewer("/admin/registry/toolpin/"),
    "pin.approve": pin_approve,
    "audit.view": viewer("/admin/audit/auditevent/"),
    "audit.export": audit_export,
    "audit.prove": audit_prove,
    "audit.change": audit_change,
    "audit.delete": audit_delete,
    "audit.verify": audit_verify(full=False),
    "audit.verify_full": audit_verify(full=True),
    "checkpoint.view": viewer("/admin/audit/auditcheckpoint/"),
    "checkpoint.delete": checkpoint_delete,
    "checkpoint.api": viewer("/api/audit-checkpoints/latest/"),
    "proof.inclusion": viewer("/api/audit-events/1/inclusion-proof/"),
    "proof.consistency": viewer("/api/audit-checkpoints/consistency-proof/?from=1&to=1"),
    "api_token.view": viewer("/admin/core/apitoken/"),
    "api_token.revoke": api_token_revoke,
    "api_token.reassign": api_token_reassign,
    "user.change_groups": user_change_groups,
}


def test_the_matrix_names_every_action():
    assert set(MATRIX) == set(ACTIONS)


@pytest.fixture
def fault():
    with serving(FaultServer()) as app:
        yield app


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", list(MATRIX))
def test_each_role_may_do_exactly_what_the_matrix_says(action, role, fault, tmp_path, settings):
    world = World(fault, tmp_path, settings)
    user = world.user(role)
    browser = Client()
    browser.force_login(user)
    response, happened = ACTIONS[action](browser, world, user)
    if role in MATRIX[action]:
        assert response.status_code in (200, 302, 303), response.content.decode()[:1500]
        assert happened, f"{role} could not {action}"
    else:
        assert not happened, f"{role} could {action}"
        # 403, or the admin's "no such object" redirect for a row outside the user's queryset;
        # a list action the user is not offered leaves the list as it was.
        allowed = (302, 403, 404) + ((200,) if action in LIST_ACTIONS else ())
        assert response.status_code in allowed, response.status_code
    if action.startswith("console.") and role not in MATRIX[action]:
        # Nothing was sent anywhere: no bearer left this process for a refused user.
        assert fault.requests == []
