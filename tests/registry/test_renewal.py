"""Delegation lifecycle: Renew issues a successor with the same stakeholder, tools and agent
(shown once), and its predecessor is revoked when the successor's token is first used, or at
once if chosen; several delegations are revoked with one reason. Every step is audited."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from kb.models import Branch, Stakeholder
from mcpserver.principals import authenticate_token
from registry.declarations import KB_TOOL_NAME
from registry.models import TokenDelegation
from registry.renewal import RETIRED_ON_FIRST_USE, delegation_renew
from registry.services import DelegationError, delegation_issue, delegation_revoke

pytestmark = pytest.mark.django_db


@pytest.fixture
def old():
    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    planner = Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )
    delegation, token = delegation_issue(
        stakeholder=planner,
        agent_name="claude desktop",
        tools=[KB_TOOL_NAME, "other.tool"],
        expires_at=timezone.now() + timedelta(days=2),
    )
    return delegation


@pytest.fixture
def admin():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests"))
    return client


def later(days=20):
    return (timezone.localtime() + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M")


def test_renewing_issues_a_successor_shown_once_and_keeps_the_old_until_first_use(old, admin):
    response = admin.post(
        f"/admin/registry/tokendelegation/{old.pk}/renew/", {"expires_at": later()}
    )
    assert response.status_code == 303
    successor = TokenDelegation.objects.exclude(pk=old.pk).get()
    assert (successor.stakeholder_id, successor.agent_name, successor.tools) == (
        old.stakeholder_id,
        old.agent_name,
        old.tools,
    )
    assert successor.renews_id == old.pk
    page = admin.get(response["Location"]).content.decode()
    token = re.search(r'id="issued-token"[^>]*>([^<]+)<', page).group(1)
    old.refresh_from_db()
    assert old.revoked_at is None, "the old token keeps working until the new one is used"
    renewed = AuditEvent.objects.get(action="registry.delegation_renewed")
    assert renewed.target == f"delegation:{old.pk}"
    assert renewed.changes["after"]["predecessor_revoked"] == "on_first_use"
    assert token not in str(renewed.changes)

    # The successor's first request (the gate's own lookup) retires the predecessor.
    assert authenticate_token(token).principal is not None
    old.refresh_from_db()
    assert old.revoked_at is not None and old.revoked_reason == RETIRED_ON_FIRST_USE
    revoked = AuditEvent.objects.get(action="registry.delegation_revoked")
    assert revoked.target == f"delegation:{old.pk}"


def test_renewing_can_revoke_the_old_at_once(old, admin):
    admin.post(
        f"/admin/registry/tokendelegation/{old.pk}/renew/",
        {"expires_at": later(), "revoke_now": "on"},
    )
    old.refresh_from_db()
    assert old.revoked_at is not None and "갱신됨" in old.revoked_reason


def test_a_revoked_delegation_is_not_renewed(old):
    delegation_revoke(delegation=old, reason="lost")
    with pytest.raises(DelegationError):
        delegation_renew(
            delegation=old, expires_at=timezone.now() + timedelta(days=1), revoke_now=False
        )
    assert TokenDelegation.objects.count() == 1


def test_renewing_beyond_the_maximum_is_refused_beside_the_field(old, admin):
    response = admin.post(
        f"/admin/registry/tokendelegation/{old.pk}/renew/", {"expires_at": later(days=400)}
    )
    assert response.status_code == 200
    assert "최대" in response.content.decode()
    assert TokenDelegation.objects.count() == 1


def test_bulk_revoke_asks_for_a_reason_then_revokes_each_with_it(old, admin):
    second, _ = delegation_issue(
        stakeholder=old.stakeholder, agent_name="second", expires_at=timezone.now() + timedelta(1)
    )
    chosen = {"action": "revoke_selected", "_selected_action": [old.pk, second.pk]}
    asked = admin.post("/admin/registry/tokendelegation/", chosen)
    assert asked.status_code == 200 and 'name="reason"' in asked.content.decode()
    assert not TokenDelegation.objects.filter(revoked_at__isnull=False).exists()

    blank = admin.post("/admin/registry/tokendelegation/", {**chosen, "apply": "1", "reason": " "})
    assert blank.status_code == 200
    assert not TokenDelegation.objects.filter(revoked_at__isnull=False).exists()

    done = admin.post(
        "/admin/registry/tokendelegation/", {**chosen, "apply": "1", "reason": "노트북 분실"}
    )
    assert done.status_code == 302
    assert set(TokenDelegation.objects.values_list("revoked_reason", flat=True)) == {"노트북 분실"}
    assert AuditEvent.objects.filter(action="registry.delegation_revoked").count() == 2
