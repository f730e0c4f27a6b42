"""The access page ("why can't I see it?"): per stakeholder its role, its rows counted with the rule
in words, its masked columns, its tools and their pins, and whether one record is visible to it.
Counts are checked against truth computed from the dataset's CSV files."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from core.groups import AUDITORS, MCP_ADMINS, ensure_default_groups
from kb.access import record_visibility, stakeholder_access
from kb.models import Stakeholder
from registry.declarations import KB_TOOL_NAME
from registry.models import McpServer, ToolPin
from registry.services import delegation_issue
from tests.kb.conftest import (
    demo_rows,
    expected_contract_ids,
    expected_customer_ids,
    expected_payment_ids,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def truth_counts() -> dict[str, tuple[int, int, int]]:
    """stakeholder id -> (customers, contracts, payments) it may see, from the CSV files alone."""
    return {
        person["stakeholder_id"]: tuple(
            len(expected(person["stakeholder_id"]))
            for expected in (expected_customer_ids, expected_contract_ids, expected_payment_ids)
        )
        for person in demo_rows("stakeholders")
    }


def user_in(group_name: str):
    ensure_default_groups()
    user = get_user_model().objects.create_user(
        f"{group_name}-user", password="pw-access-1", is_staff=True
    )
    user.groups.add(Group.objects.get(name=group_name))
    return user


def page(client, stakeholder_id: str, record: str | None = None) -> str:
    url = f"/admin/registry/tokendelegation/access/{stakeholder_id}/"
    response = client.get(url, {"record": record} if record else {})
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def shown_counts(body: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r'<td class="count">(\d+)</td>', body.replace(",", "")))


def test_every_stakeholders_counts_are_what_the_csv_files_say(kb_demo):
    truth = truth_counts()
    for stakeholder in Stakeholder.objects.select_related("branch"):
        access = stakeholder_access(stakeholder=stakeholder)
        if stakeholder.status != Stakeholder.Status.ACTIVE:
            assert access.refused and not access.counts, stakeholder.pk
            continue
        counts = tuple(entry.count for entry in access.counts)
        assert counts == truth[stakeholder.pk], stakeholder.pk


def test_the_page_says_the_rule_in_words_with_the_counts(kb_demo, client):
    client.force_login(user_in(MCP_ADMINS))
    customers, contracts, payments = truth_counts()["KB-P-001"]
    body = page(client, "KB-P-001")
    assert shown_counts(body) == (customers, contracts, payments)
    assert f"담당 고객 {customers}명, 그 계약 {contracts}건, 납입 {payments:,}건" in body
    assert "설계사" in re.search(r'id="access-role">(.*?)</p>', body, re.S).group(1)

    manager = page(client, "KB-M-001")
    c, k, p = truth_counts()["KB-M-001"]
    assert shown_counts(manager) == (c, k, p)
    assert f"강남지점(BR-GN) 고객 {c}명" in manager

    hq = page(client, "KB-H-001")
    assert f"전체 고객 {len(demo_rows('customers'))}명" in hq


def test_masked_columns_are_listed_with_how_they_are_shown(kb_demo, client):
    client.force_login(user_in(AUDITORS))
    hq = page(client, "KB-H-001")
    masks = dict(re.findall(r'data-column="([a-z_]+)" data-mask="([a-z_0-9]+)"', hq))
    assert masks == {
        "customer_name": "name",
        "phone": "withheld",
        "rrn": "withheld",
        "birth_date": "year_only",
        "age": "from_birth_year",
        "age_group": "from_birth_year",
    }
    manager = page(client, "KB-M-001")
    assert dict(re.findall(r'data-column="([a-z_]+)" data-mask="([a-z_0-9]+)"', manager)) == {
        "phone": "phone_middle",
        "rrn": "rrn_first8",
    }
    assert "010-****-5678" in manager


def test_a_suspended_stakeholder_is_refused_and_the_page_says_so(kb_demo, client):
    client.force_login(user_in(MCP_ADMINS))
    body = page(client, "KB-P-099")
    assert 'id="access-refused"' in body and "정지된 사용자" in body
    assert 'id="access-counts"' not in body


def test_the_delegated_tools_show_which_are_held_by_pinning(kb_demo, client):
    planner = Stakeholder.objects.get(pk="KB-P-001")
    delegation, _ = delegation_issue(
        stakeholder=planner,
        agent_name="access page",
        expires_at=timezone.now() + timedelta(days=1),
        tools=[KB_TOOL_NAME, "other.tool"],
    )
    server = McpServer.objects.create(server_id="held-elsewhere", provider="generic")
    ToolPin.objects.create(server=server, tool_name="other.tool", pending_hash="ab" * 32)
    client.force_login(user_in(AUDITORS))
    body = page(client, "KB-P-001")
    tools = re.search(r'id="access-tools">(.*?)</table>', body, re.S).group(1)
    assert delegation.display_prefix in tools
    assert KB_TOOL_NAME in tools and "other.tool" in tools
    held = re.findall(r"<code>([^<]+)</code> <span class=\"public-error held\">([^<]+)", tools)
    assert held == [("other.tool", "고정에 걸려 보류됨 (held-elsewhere)")]
    # The page is linked from the delegation.
    change = client.get(f"/admin/registry/tokendelegation/{delegation.pk}/change/")
    assert "/admin/registry/tokendelegation/access/KB-P-001/" in change.content.decode()


@pytest.mark.parametrize(
    ("stakeholder_id", "record", "visible", "words"),
    [
        ("KB-P-001", "C0001", True, "담당 설계사가 KB-P-001"),
        ("KB-P-001", "c0001", True, "담당 설계사가 KB-P-001"),
        ("KB-P-001", "K00001", True, "계약은 그 고객을 따릅니다"),
        ("KB-P-001", "PM000001", True, "보험료 납입은 그 고객을 따릅니다"),
        ("KB-M-001", "C0001", True, "강남지점(BR-GN) 고객"),
        ("KB-H-001", "C0001", True, "모든 고객"),
        ("KB-P-099", "C0001", False, "정지된 사용자"),
        ("KB-P-001", "X123", False, "ID를 입력하세요"),
    ],
)
def test_one_record_is_visible_or_not_and_the_rule_is_named(
    kb_demo, stakeholder_id, record, visible, words
):
    stakeholder = Stakeholder.objects.select_related("branch").get(pk=stakeholder_id)
    answer = record_visibility(stakeholder=stakeholder, record_id=record)
    assert answer.visible is visible
    assert words in answer.rule


def test_records_of_another_planner_are_not_visible_and_agree_with_the_csv(kb_demo, client):
    visible = expected_customer_ids("KB-P-001")
    others = sorted({row["customer_id"] for row in demo_rows("customers")} - visible)
    contracts = demo_rows("contracts")
    foreign_contract = next(c["contract_id"] for c in contracts if c["customer_id"] in others)
    own_contract = next(c["contract_id"] for c in contracts if c["customer_id"] in visible)
    client.force_login(user_in(MCP_ADMINS))
    for record, expected in ((others[0], "no"), (foreign_contract, "no"), (own_contract, "yes")):
        body = page(client, "KB-P-001", record)
        assert f'data-visible="{expected}"' in body, record
    assert "보이지 않음: 설계사는 자신(KB-P-001)이 담당하는 고객" in page(
        client, "KB-P-001", others[0]
    )


def test_only_those_who_may_explain_access_open_the_page(kb_demo, client):
    staff = get_user_model().objects.create_user("staff-only", password="pw-x", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/registry/tokendelegation/access/KB-P-001/").status_code == 403
    client.force_login(user_in(AUDITORS))
    assert client.get("/admin/registry/tokendelegation/access/NOPE/").status_code == 404


def visibility_line(body: str) -> str:
    return re.search(r'id="access-visibility".*?</p>', body, re.S).group(0)


@pytest.mark.parametrize("stakeholder_id", ["KB-P-001", "KB-M-001"])
def test_auditors_get_the_verdict_and_the_rule_never_the_records_customer(
    kb_demo, client, stakeholder_id
):
    visible = expected_customer_ids(stakeholder_id)
    contract = next(c for c in demo_rows("contracts") if c["customer_id"] in visible)
    payment = next(
        p for p in demo_rows("premium_payments") if p["contract_id"] == contract["contract_id"]
    )
    auditor, admin = user_in(AUDITORS), user_in(MCP_ADMINS)
    for record_id in (contract["contract_id"], payment["payment_id"]):
        client.force_login(auditor)
        shown = visibility_line(page(client, stakeholder_id, record_id))
        assert 'data-visible="yes"' in shown and "이 기록의 고객" in shown
        assert contract["customer_id"] not in shown
        client.force_login(admin)  # who may read the KB's rows may see which customer decides
        assert contract["customer_id"] in visibility_line(page(client, stakeholder_id, record_id))
