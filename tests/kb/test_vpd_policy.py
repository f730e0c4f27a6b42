"""The policy module, the answer shape, the selectors and the admin around the KB data layer."""

import io
import json

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from kb import policy
from kb.answers import ANSWER_JSON_SCHEMA
from kb.models import Contract, Customer, PremiumPayment, Stakeholder
from kb.plans import ENTITIES, PlanError
from kb.policy import Mask, PolicyRefused, check_stakeholder_allowed, column_mask, mask_value
from kb.selectors import kb_as_of_date, stakeholder_get, vocabulary_rows
from kb.vpd import execute_plan
from tests.kb.conftest import AS_OF


def test_the_policy_knows_every_field_a_plan_can_name_and_nothing_more():
    for name, spec in ENTITIES.items():
        assert set(spec.fields) == policy.ENTITY_COLUMNS[name]


@pytest.mark.parametrize(
    ("mask", "value", "shown"),
    [
        (Mask.NAME, "김민준", "김**"),
        (Mask.NAME, "남궁민수", "남***"),
        (Mask.PHONE_MIDDLE, "010-1234-5678", "010-****-5678"),
        (Mask.RRN_FIRST8, "870211-2076141", "870211-2******"),
        (Mask.WITHHELD, "870211-2076141", None),
        (Mask.FULL, "870211-2076141", "870211-2076141"),
        (Mask.NAME, None, None),
    ],
)
def test_masks_show_what_the_readme_table_says(mask, value, shown):
    assert mask_value(mask, value) == shown


def test_birth_dates_are_cut_to_the_year():
    import datetime as dt

    assert mask_value(Mask.YEAR_ONLY, dt.date(1987, 2, 11)) == "1987"


def test_a_column_or_role_the_policy_does_not_know_gets_no_mask_at_all():
    assert column_mask("planner", "customers", "password") is None
    assert column_mask("auditor", "customers", "grade") is None
    assert column_mask("planner", "contracts", "rrn") is None  # rrn is not a contracts column
    assert column_mask("hq_analyst", "contracts", "customer_name") is Mask.NAME


@pytest.mark.parametrize(
    ("role", "status", "branch", "reason"),
    [
        ("planner", "suspended", "BR-GN", "suspended"),
        ("planner", "", "BR-GN", "suspended"),
        ("admin", "active", "BR-GN", "unknown_role"),
        ("", "active", "BR-GN", "unknown_role"),
        ("branch_manager", "active", None, "no_branch"),
    ],
)
def test_check_stakeholder_allowed_refuses_without_touching_the_database(
    role, status, branch, reason
):
    stakeholder = Stakeholder(stakeholder_id="X", role=role, status=status, branch_id=branch)

    with pytest.raises(PolicyRefused) as refused:
        check_stakeholder_allowed(stakeholder)
    assert refused.value.reason == reason
    assert refused.value.message  # Korean, shown to the user


@pytest.mark.parametrize(
    ("role", "branch"),
    [("planner", None), ("branch_manager", "BR-GN"), ("hq_analyst", None)],
)
def test_an_active_stakeholder_with_what_its_role_needs_may_query(role, branch):
    assert policy.query_refusal(role=role, status="active", branch_id=branch) is None


def test_a_branch_manager_without_a_branch_may_not_query_at_all():
    for branch in (None, ""):
        refusal = policy.query_refusal(role="branch_manager", status="active", branch_id=branch)
        assert refusal.reason == "no_branch"


def test_policy_refused_is_a_permission_error_so_views_answer_403():
    from django.core.exceptions import PermissionDenied

    assert issubclass(PolicyRefused, PermissionDenied)


def test_a_column_the_policy_stops_knowing_is_neither_returned_nor_usable(kb, monkeypatch):
    monkeypatch.setitem(
        policy.ENTITY_COLUMNS, "customers", policy.ENTITY_COLUMNS["customers"] - {"grade"}
    )
    planner = stakeholder_get("KB-P-001")

    answer = execute_plan({"entity": "customers"}, stakeholder=planner)
    assert "grade" not in [c["name"] for c in answer["columns"]]
    assert all("grade" not in row for row in answer["rows"])
    with pytest.raises(PlanError):
        execute_plan({"entity": "customers", "fields": ["grade"]}, stakeholder=planner)


# --- the answer shape --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "plan",
    [
        {"entity": "customers", "fields": ["customer_name", "birth_date", "phone", "rrn", "age"]},
        {"entity": "contracts"},
        {"entity": "premium_payments", "limit": 100},
        {
            "entity": "premium_payments",
            "group_by": ["due_month", "status"],
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "avg", "field": "amount", "as": "avg_amount"},
                {"fn": "max", "field": "paid_date", "as": "max_paid_date"},
            ],
        },
        {"entity": "contracts", "aggregates": [{"fn": "sum", "field": "sum_insured"}]},
    ],
)
@pytest.mark.parametrize("stakeholder_id", ["KB-P-001", "KB-M-001", "KB-H-001"])
def test_every_answer_matches_the_published_json_schema(kb, plan, stakeholder_id):
    jsonschema = pytest.importorskip("jsonschema")

    answer = execute_plan(plan, stakeholder=stakeholder_get(stakeholder_id))

    jsonschema.validate(json.loads(json.dumps(answer)), ANSWER_JSON_SCHEMA)
    assert answer["row_count"] == len(answer["rows"]) > 0
    assert [c["name"] for c in answer["columns"]] == list(answer["rows"][0])


def test_the_as_of_date_the_tests_compute_against_is_the_configured_one():
    assert kb_as_of_date() == AS_OF


def test_the_as_of_date_comes_from_settings(kb, settings):
    settings.KB_AS_OF_DATE = "2030-01-01"

    answer = execute_plan(
        {
            "entity": "customers",
            "fields": ["age"],
            "filters": [{"field": "customer_id", "op": "eq", "value": "C0001"}],
        },
        stakeholder=stakeholder_get("KB-P-001"),
    )

    assert kb_as_of_date().isoformat() == answer["as_of"] == "2030-01-01"
    assert answer["rows"][0]["age"] == 2029 - 1987  # born 02-11: not yet 43 on 01-01


# --- selectors -------------------------------------------------------------------------------


def test_stakeholder_get_finds_any_stakeholder_and_nothing_else(kb):
    assert stakeholder_get("KB-P-099").status == "suspended"
    assert stakeholder_get("KB-Z-000") is None
    assert stakeholder_get("") is None
    assert stakeholder_get(None) is None


def test_vocabulary_rows_feed_the_parsers_vocabulary(kb):
    from kb.selectai.vocabulary import vocabulary_from_rows

    rows = vocabulary_rows()
    vocabulary = vocabulary_from_rows(**rows)

    assert len(rows["products"]) == 6 and len(rows["branches"]) == 4
    assert rows["stakeholders"][0] == {
        "stakeholder_id": "KB-H-001",
        "name": "강현우",
        "role": "hq_analyst",
        "branch_id": None,
        "status": "active",
    }
    assert vocabulary.branches["BR-GN"] == "강남지점"
    assert vocabulary.planners["KB-P-001"] == "윤지유"


def test_vocabulary_rows_carry_no_customer_data(kb):
    text = json.dumps(vocabulary_rows(), ensure_ascii=False)

    assert "C0001" not in text and "신하은" not in text


# --- admin and the DBA command ---------------------------------------------------------------


def test_customer_contract_and_payment_rows_are_not_in_the_admin():
    for model in (Customer, Contract, PremiumPayment):
        assert not admin.site.is_registered(model)


def test_the_admin_lists_stakeholders_read_only(kb, client):
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))

    listing = client.get(reverse("admin:kb_stakeholder_changelist"))
    adding = client.get(reverse("admin:kb_stakeholder_add"))

    assert listing.status_code == 200
    assert "KB-P-001" in listing.content.decode()
    assert adding.status_code == 403


def test_setup_kb_db_role_can_be_run_again_and_again(db):
    from django.db import connection

    # On PostgreSQL it (re)grants the reader role; elsewhere the row policy lives in queries only.
    expected = "is ready" if connection.vendor == "postgresql" else "nothing to do"
    for _ in range(2):
        out = io.StringIO()
        call_command("setup_kb_db_role", stdout=out)
        assert expected in out.getvalue()
