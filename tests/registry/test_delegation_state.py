"""One rule says whether a delegation is usable: /mcp, the model, its queryset, the admin's filter
and the selectors all agree, the audience included."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from kb.models import Branch, Stakeholder
from registry import delegations
from registry.models import DELEGATION_STATES, TokenDelegation, delegation_state
from registry.selectors import delegation_for_token_is_usable

pytestmark = pytest.mark.django_db

HERE, ELSEWHERE = "https://kb.example/mcp", "https://staging.example/mcp"


@pytest.fixture
def planner():
    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    return Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )


@pytest.fixture
def every_kind(planner, settings):
    """One delegation in each state (and an unbound one), with its token."""
    later = timezone.now() + timedelta(days=1)
    made = {}
    for name, audience in (("here", HERE), ("elsewhere", ELSEWHERE), ("unbound", "")):
        settings.MCP_RESOURCE_URL = audience
        made[name] = delegations.delegation_issue(
            stakeholder=planner, agent_name=name, expires_at=later
        )
    settings.MCP_RESOURCE_URL = HERE
    made["revoked"] = delegations.delegation_issue(
        stakeholder=planner, agent_name="revoked", expires_at=later
    )
    delegations.delegation_revoke(delegation=made["revoked"][0], reason="test")
    made["expired"] = delegations.delegation_issue(
        stakeholder=planner, agent_name="expired", expires_at=later
    )
    TokenDelegation.objects.filter(pk=made["expired"][0].pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    return made


EXPECTED = {
    "here": "active",
    "unbound": "active",
    "elsewhere": "wrong_audience",
    "revoked": "revoked",
    "expired": "expired",
}


def test_the_model_the_queryset_and_the_gate_agree_on_every_state(every_kind, planner):
    now = timezone.now()
    for name, (delegation, token) in every_kind.items():
        delegation.refresh_from_db()
        state = delegation.state(now=now)
        assert state == EXPECTED[name], name
        assert state == delegation_state(
            delegation.revoked_at, delegation.expires_at, delegation.audience, now
        )
        authenticated = delegations.authenticate_token(token)
        assert (authenticated.principal is not None) == (state == "active"), name
        if state != "active":
            assert authenticated.failure == state
        assert delegation_for_token_is_usable(token=token, stakeholder=planner) == (
            state == "active"
        )
    for state in DELEGATION_STATES:
        in_state = set(TokenDelegation.objects.in_state(state, now=now).values_list("agent_name"))
        assert in_state == {(n,) for n, s in EXPECTED.items() if s == state}, state
    assert set(TokenDelegation.objects.usable(now=now).values_list("agent_name", flat=True)) == {
        "here",
        "unbound",
    }


def test_the_admin_filter_lists_each_state_as_the_rule_says(every_kind, client):
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))
    url = reverse("admin:registry_tokendelegation_changelist")
    for state in DELEGATION_STATES:
        page = client.get(url, {"state": state})
        assert page.status_code == 200
        shown = {d.agent_name for d in page.context["cl"].result_list}
        assert shown == {n for n, s in EXPECTED.items() if s == state}, state


def test_without_a_named_resource_no_delegation_is_for_another_one(every_kind, settings):
    settings.MCP_RESOURCE_URL = ""
    now = timezone.now()
    assert not TokenDelegation.objects.in_state("wrong_audience", now=now).exists()
    elsewhere = every_kind["elsewhere"][0]
    assert elsewhere.state(now=now) == "active"
