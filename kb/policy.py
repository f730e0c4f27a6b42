"""The KB VPD policy, defined once: which rows each role sees and how each column is shown.

Everything that enforces the policy reads it from here: the data layer's row filter (Q objects), the
PostgreSQL row-level security policies (`rls_statements`) and the column masks applied to answers.

Decisions beyond the dataset README: a column may be filtered, sorted, grouped or aggregated only
when the role sees it in full (otherwise the answer would reveal the hidden value); age and
age_group derive from birth_date and for hq_analyst are computed from the birth YEAR only
(age = as-of year - birth year), which tells nothing the year does not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass
from enum import StrEnum

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import Q
from django.utils.translation import get_language, gettext, pgettext_lazy

from core import tracing
from kb.catalogue import ENTITIES, EntitySpec
from kb.errors import KbError
from kb.josa import josa_in
from kb.models import Contract, Customer, PremiumPayment, Stakeholder
from kb.plans import Filter, Plan, PlanError, aggregate_label
from kb.selectors import kb_as_of_date

PLANNER = Stakeholder.Role.PLANNER.value
BRANCH_MANAGER = Stakeholder.Role.BRANCH_MANAGER.value
HQ_ANALYST = Stakeholder.Role.HQ_ANALYST.value


class PolicyRefused(KbError, PermissionDenied):
    """The stakeholder may not query the KB at all (HTTP 403); raised before any KB query.

    `reason`: unknown_stakeholder, suspended, unknown_role, no_branch, stale_stakeholder, …"""


@dataclass(frozen=True, slots=True)
class StakeholderSnapshot:
    """Who asks, as read once from KB_STAKEHOLDERS (the /mcp gate reads it in its delegation join).

    Everything between the gate and the SQL decides on this one value and reads no stakeholder
    again; kb.vpd compares it with the stored row inside the reading transaction, so a snapshot
    that went stale (or was made up) reads nothing."""

    stakeholder_id: str
    role: str
    branch_id: str | None
    status: str

    @classmethod
    def of(cls, stakeholder) -> StakeholderSnapshot | None:
        """The snapshot of a Stakeholder row (or of anything shaped like one); None for none."""
        if stakeholder is None or not getattr(stakeholder, "stakeholder_id", None):
            return None
        if isinstance(stakeholder, cls):
            return stakeholder
        return cls(
            stakeholder_id=stakeholder.stakeholder_id,
            role=stakeholder.role,
            branch_id=stakeholder.branch_id,
            status=stakeholder.status,
        )


class RowScope(StrEnum):
    OWN = "own"  # customers.planner_id = the stakeholder
    BRANCH = "branch"  # customers.branch_id = the stakeholder's branch
    ALL = "all"


class Mask(StrEnum):
    FULL = "full"
    NAME = "name"  # 김민준 -> 김**
    PHONE_MIDDLE = "phone_middle"  # 010-1234-5678 -> 010-****-5678
    RRN_FIRST8 = "rrn_first8"  # 870211-2076141 -> 870211-2******
    YEAR_ONLY = "year_only"  # 1987-02-11 -> "1987"
    WITHHELD = "withheld"  # never returned (null)
    # Derived from birth_date and computed from its YEAR only, so it reveals nothing the role cannot
    # already see (hq_analyst: age = as-of year - birth year).
    FROM_BIRTH_YEAR = "from_birth_year"


# Row policy: customers visible per role; contracts and payments follow their customer.
ROW_SCOPES: dict[str, RowScope] = {
    PLANNER: RowScope.OWN,
    BRANCH_MANAGER: RowScope.BRANCH,
    HQ_ANALYST: RowScope.ALL,
}

# Column policy: the dataset README's table; a column named here means the same data in every
# entity that has it (customer_name appears in contracts and payments too).
MASKED_COLUMNS: dict[str, dict[str, Mask]] = {
    "customer_name": {PLANNER: Mask.FULL, BRANCH_MANAGER: Mask.FULL, HQ_ANALYST: Mask.NAME},
    "phone": {PLANNER: Mask.FULL, BRANCH_MANAGER: Mask.PHONE_MIDDLE, HQ_ANALYST: Mask.WITHHELD},
    "rrn": {PLANNER: Mask.RRN_FIRST8, BRANCH_MANAGER: Mask.RRN_FIRST8, HQ_ANALYST: Mask.WITHHELD},
    "birth_date": {PLANNER: Mask.FULL, BRANCH_MANAGER: Mask.FULL, HQ_ANALYST: Mask.YEAR_ONLY},
    # Derived from birth_date: never finer than what the role sees of birth_date.
    "age": {PLANNER: Mask.FULL, BRANCH_MANAGER: Mask.FULL, HQ_ANALYST: Mask.FROM_BIRTH_YEAR},
    "age_group": {
        PLANNER: Mask.FULL,
        BRANCH_MANAGER: Mask.FULL,
        HQ_ANALYST: Mask.FROM_BIRTH_YEAR,
    },
}

# Every column each entity may return: the catalogue's fields. "All other columns" of the README
# are these minus the masked ones; a column not listed here is unknown and is never returned.
ENTITY_COLUMNS: dict[str, frozenset[str]] = {name: spec.columns for name, spec in ENTITIES.items()}

# Masks under which a column may be filtered, sorted, grouped or aggregated: any other mask would
# let a caller infer the hidden value (e.g. `rrn between ...` narrows down a masked RRN).
COMPARABLE_MASKS = frozenset({Mask.FULL, Mask.FROM_BIRTH_YEAR})

_ROLE_LABELS = dict(Stakeholder.Role.choices)


def query_refusal(*, role: str, status: str, branch_id: str | None) -> PolicyRefused | None:
    """Why a known stakeholder may not query the KB at all, or None if it may: the one rule, asked
    by the /mcp gate on every request (from the row it reads) and by every KB read."""
    if status != Stakeholder.Status.ACTIVE:
        return PolicyRefused(gettext("정지된 사용자입니다: 조회 권한 없음"), reason="suspended")
    scope = ROW_SCOPES.get(role)
    if scope is None:
        return PolicyRefused(gettext("이 역할에는 조회 권한이 없습니다"), reason="unknown_role")
    if scope is RowScope.BRANCH and not branch_id:
        return PolicyRefused(
            gettext("지점이 지정되지 않은 지점장입니다: 조회 권한 없음"), reason="no_branch"
        )
    return None


def check_stakeholder_allowed(stakeholder: StakeholderSnapshot | Stakeholder | None) -> RowScope:
    """The stakeholder's row scope; PolicyRefused (no query is made) if it may see nothing."""
    if stakeholder is None or not stakeholder.stakeholder_id:
        raise PolicyRefused(
            gettext("알 수 없는 사용자입니다: 조회 권한 없음"), reason="unknown_stakeholder"
        )
    refusal = query_refusal(
        role=stakeholder.role, status=stakeholder.status, branch_id=stakeholder.branch_id
    )
    if refusal is not None:
        raise refusal
    return ROW_SCOPES[stakeholder.role]


@dataclass(frozen=True, slots=True)
class RowFilter:
    """The row policy for one asker and entity as data: ORM paths, each equal to its bound
    value, ANDed together (none: every row). kb.vpd writes it into the SQL, visible_customers_q
    into a Q."""

    paths: tuple[str, ...]
    values: tuple


def row_filter(stakeholder, *, customer_path: str = "") -> RowFilter:
    """The rows `stakeholder` sees of an entity whose customer is at `customer_path`."""
    scope = check_stakeholder_allowed(stakeholder)
    prefix = f"{customer_path}__" if customer_path else ""
    if scope is RowScope.OWN:
        return RowFilter((f"{prefix}planner_id",), (stakeholder.stakeholder_id,))
    if scope is RowScope.BRANCH:
        return RowFilter((f"{prefix}branch_id",), (stakeholder.branch_id,))
    return RowFilter((), ())


def visible_customers_q(stakeholder, *, customer_path: str = "") -> Q:
    """The row policy as an ORM filter; `customer_path` leads from the entity to its customer."""
    rows = row_filter(stakeholder, customer_path=customer_path)
    return Q(**dict(zip(rows.paths, rows.values, strict=True)))


OTHER_PLANNERS = "*"  # outside_scope's value for "다른 설계사": every planner but the asker


def outside_scope(plan: dict, asker: StakeholderSnapshot) -> tuple[tuple[str, str], ...]:
    """The branches and planners a plan names that lie outside the asker's rows, as (field,
    value) pairs: a question about them is answered with none of their rows, and the answer
    says why. Reads only what the asker named (and, for a branch manager naming planners, their
    branches), so it reveals nothing inside the other scope."""
    scope = ROW_SCOPES.get(asker.role)
    if scope not in (RowScope.OWN, RowScope.BRANCH):
        return ()
    named: list[tuple[str, str]] = []
    for item in plan.get("filters") or ():
        if item["field"] not in ("branch_id", "planner_id"):
            continue
        values = item["value"] if isinstance(item["value"], list) else [item["value"]]
        if item["op"] in ("eq", "in"):
            named += [(item["field"], str(value)) for value in values]
        elif item["field"] == "planner_id" and scope is RowScope.OWN:
            if asker.stakeholder_id in values:  # "다른 설계사": everyone but the asker
                named.append(("planner_id", OTHER_PLANNERS))
    planners = [value for field, value in named if field == "planner_id" and value != "*"]
    branch_of = {}
    if scope is RowScope.BRANCH and planners:
        branch_of = dict(
            Stakeholder.objects.filter(stakeholder_id__in=planners).values_list(
                "stakeholder_id", "branch_id"
            )
        )
    outside = []
    for field, value in named:
        if field == "branch_id":
            out = value != asker.branch_id
        elif value == OTHER_PLANNERS or scope is RowScope.OWN:
            out = value != asker.stakeholder_id
        else:
            out = branch_of.get(value) != asker.branch_id
        if out:
            outside.append((field, value))
    return tuple(dict.fromkeys(outside))


def column_mask(role: str, entity: str, column: str) -> Mask | None:
    """How `role` sees `column` of `entity`; None if the policy does not know it (not returned)."""
    if role not in ROW_SCOPES or column not in ENTITY_COLUMNS.get(entity, ()):
        return None
    rules = MASKED_COLUMNS.get(column)
    if rules is None:
        return Mask.FULL
    return rules.get(role)


class ConditionRefused(PlanError):
    """A plan's condition, sort, grouping or aggregate uses a column the asker sees masked.

    Answering it would reveal the hidden value (a count of "RRNs starting with 87" narrows them
    down), so the plan is refused and the message says which condition and why, in the active
    language (kb.answering activates the question's). The one refusal of a masked use, whoever
    wrote the plan: the reader, a model, or an operator's literal plan.
    """

    field: str | None  # None on a QuestionRefused, which names words rather than a column
    use: str | None

    def __init__(self, *, role: str, entity: str, field: str, use: str):
        spec = ENTITIES[entity].fields[field]
        message = gettext(
            "%(label)s(%(field)s) %(use)s 처리할 수 없습니다: %(role)s 권한에서는 이 열이 "
            "가려져 있어, 조건·정렬·그룹·집계에 쓰면 가려진 값이 드러납니다. "
            "이 조건 없이 다시 물어봐 주세요."
        ) % {
            "label": spec.label_in(get_language()),
            "field": field,
            "use": josa_in(get_language(), str(_USES.get(use, _USES["filter"])), "은/는"),
            "role": role_label(role),
        }
        super().__init__(message, code="masked_column")
        self.reason = "masked_condition"
        self.field, self.use = field, use


# How a question uses a column, as ConditionRefused names it ("조건" is a filter here).
_USES = {
    "filter": pgettext_lazy("column use", "조건"),
    "sort": pgettext_lazy("column use", "정렬"),
    "group": pgettext_lazy("column use", "그룹"),
    "aggregate": pgettext_lazy("column use", "집계"),
}


def masked_use(role: str, entity: str, used: dict[str, str]) -> tuple[str, str] | None:
    """The first (field, use) that filters, sorts, groups or aggregates a column `role` sees
    masked (or does not know); None when every use is allowed."""
    for name, use in used.items():
        if use == "select":
            continue
        if column_mask(role, entity, name) not in COMPARABLE_MASKS:
            return name, use
    return None


def role_label(role: str) -> str:
    return str(_ROLE_LABELS.get(role, role))


# --- one plan, policed once --------------------------------------------------------------------


@dataclass(frozen=True)
class PolicedPlan:
    """A plan the policy has allowed for one asker, with everything the data layer needs to run it
    as that asker: kb.vpd takes it as given and never asks the policy again."""

    plan: Plan
    asker: StakeholderSnapshot
    masks: dict[str, Mask]  # every field the plan touches or may output -> how it is shown
    related_masks: tuple[tuple[tuple[str, Mask], ...], ...]  # per related condition
    columns: tuple[tuple[str, str], ...]  # the answer's (name, label): fields, then aggregates
    masked_columns: tuple[str, ...]  # the answer's columns shown less than in full
    rows: RowFilter
    notes: tuple[str, ...] = ()  # what fitting the plan to the role changed, for the asker


@tracing.traced("kb.police")
def police(
    plan: Plan,
    asker: StakeholderSnapshot | None,
    *,
    as_question: bool = True,
    unexpressed: tuple[str, ...] = (),
    as_of: dt.date | None = None,
) -> PolicedPlan:
    """Allow `plan` for `asker`, or refuse it: the policy's one decision on a plan.

    Raises PolicyRefused when the asker may see nothing (before any query), ConditionRefused when
    the plan would use a column the asker sees masked, PlanError for a field the policy does not
    know. A question's plan (`as_question`, the default) is first fitted to the role where the
    same rows can be had without a masked column (fit_to_role), and a masked use, among its own
    and the question's conditions no plan could express (`unexpressed`), is refused as that
    before anything else; a literal plan (`as_question=False`) is judged as written."""
    check_stakeholder_allowed(asker)
    assert asker is not None  # checked just above; narrows the type
    notes: tuple[str, ...] = ()
    if as_question:
        plan, notes = fit_to_role(plan, asker.role, as_of=as_of)
        used = {**plan.referenced_fields(), **dict.fromkeys(unexpressed, "filter")}
        refused = masked_use(asker.role, plan.entity, used)
        if refused is not None:
            field, use = refused
            raise ConditionRefused(role=asker.role, entity=plan.entity, field=field, use=use)
    masks = column_masks(plan, asker.role)
    related = related_masks(plan, asker.role)
    columns = output_columns(plan, masks)
    aggregate_fields = {agg.alias: agg.field for agg in plan.aggregates}
    masked = tuple(
        name
        for name, _label in columns
        if masks.get(aggregate_fields.get(name) or name, Mask.FULL) is not Mask.FULL
    )
    return PolicedPlan(
        plan=plan,
        asker=asker,
        masks=masks,
        related_masks=related,
        columns=tuple(columns),
        masked_columns=masked,
        rows=row_filter(asker, customer_path=plan.spec.customer_path),
        notes=notes,
    )


def column_masks(plan: Plan, role: str) -> dict[str, Mask]:
    """The mask of every field the plan touches or may output; refuses what the policy forbids."""
    spec = plan.spec
    masks: dict[str, Mask] = {}
    used = plan.referenced_fields()
    for name in [spec.key, *spec.defaults, *used]:
        mask = column_mask(role, plan.entity, name)
        if mask is not None:
            masks[name] = mask
    _refuse_unusable(spec, role, used, masks)
    return masks


def related_masks(plan: Plan, role: str) -> tuple[tuple[tuple[str, Mask], ...], ...]:
    """The masks of the fields each `related` condition filters on; refuses a masked one (a
    question may not narrow a hidden value down through a customer's other rows either)."""
    out = []
    for related in plan.related:
        used = {f.field: "filter" for f in related.filters}
        found = {name: column_mask(role, related.entity, name) for name in used}
        masks = {name: mask for name, mask in found.items() if mask is not None}
        _refuse_unusable(ENTITIES[related.entity], role, used, masks)
        out.append(tuple(masks.items()))
    return tuple(out)


def _refuse_unusable(
    spec: EntitySpec, role: str, used: dict[str, str], masks: dict[str, Mask]
) -> None:
    """PlanError for a used field the policy does not know (fail closed), ConditionRefused for
    one the role sees masked."""
    for name in used:
        if name not in masks:
            label = spec.fields[name].label_in(get_language())
            raise PlanError(
                gettext("조회할 수 없는 필드입니다: %(label)s(%(field)s)")
                % {"label": label, "field": name},
                code="unknown_field",
            )
    refused = masked_use(role, spec.name, used)
    if refused is not None:
        name, use = refused
        raise ConditionRefused(role=role, entity=spec.name, field=name, use=use)


def output_columns(plan: Plan, masks: dict[str, Mask]) -> list[tuple[str, str]]:
    """The answer's (name, label) columns: a withheld default column is left out."""
    spec = plan.spec
    if plan.grouped:
        names = list(plan.group_by)
    elif plan.fields:
        names = list(dict.fromkeys([spec.key, *plan.fields]))
    else:
        # Default columns leave out what this role would only ever see as null.
        names = [n for n in spec.defaults if masks.get(n) not in (None, Mask.WITHHELD)]
        names = list(dict.fromkeys([spec.key, *names]))
    language = get_language()
    columns = [(name, spec.fields[name].label_in(language)) for name in names if name in masks]
    columns += [(agg.alias, aggregate_label(plan, agg)) for agg in plan.aggregates]
    return columns


# --- fitting a question's plan to the role -------------------------------------------------------


def fit_to_role(plan: Plan, role: str, *, as_of: dt.date | None = None) -> tuple[Plan, tuple]:
    """The same question without a masked column where its rows do not need one, and notes.

    Grouped by customer_id alone when customer_name, only its label, is masked for this role (the
    groups are the same, and a masked column may not be grouped by). A whole-year birth condition
    ("1987년생") becomes the same condition on age where the role sees only the birth year and
    its ages come from that year.
    """
    plan = _birth_years_as_ages(plan, role, as_of)
    if "customer_id" not in plan.group_by or "customer_name" not in plan.group_by:
        return plan, ()
    if column_mask(role, plan.entity, "customer_name") in COMPARABLE_MASKS:
        return plan, ()
    fitted = dataclasses.replace(
        plan,
        group_by=tuple(name for name in plan.group_by if name != "customer_name"),
        order_by=tuple(o for o in plan.order_by if o.key != "customer_name"),
    )
    return fitted, (gettext("이 권한에서는 고객명이 가려져 있어 고객 ID로 묶었습니다."),)


def _birth_years_as_ages(plan: Plan, role: str, as_of: dt.date | None) -> Plan:
    fields = plan.spec.fields
    if "age" not in fields or not any(f.field == "birth_date" for f in plan.filters):
        return plan
    if column_mask(role, plan.entity, "birth_date") is not Mask.YEAR_ONLY:
        return plan
    if column_mask(role, plan.entity, "age") is not Mask.FROM_BIRTH_YEAR:
        return plan
    this_year = (as_of or kb_as_of_date()).year
    filters = tuple(
        (_age_condition(item, this_year) if item.field == "birth_date" else None) or item
        for item in plan.filters
    )
    return dataclasses.replace(plan, filters=filters)


def _age_condition(item: Filter, this_year: int) -> Filter | None:
    """birth_date on whole years -> the same rows by age = as-of year - birth year; else None."""
    op, value = item.op, item.value
    values = value if isinstance(value, tuple) else (value,)
    if not all(isinstance(v, dt.date) for v in values):
        return None
    years = [v.year for v in values]
    starts = [(v.month, v.day) == (1, 1) for v in values]
    ends = [(v.month, v.day) == (12, 31) for v in values]
    if op == "between" and len(values) == 2 and starts[0] and ends[1]:
        return Filter("age", "between", (this_year - years[1], this_year - years[0]))
    if op == "gte" and starts[0]:
        return Filter("age", "lte", this_year - years[0])
    if op == "lt" and starts[0]:
        return Filter("age", "gt", this_year - years[0])
    if op == "gt" and ends[0]:
        return Filter("age", "lt", this_year - years[0])
    if op == "lte" and ends[0]:
        return Filter("age", "gte", this_year - years[0])
    return None


# --- masking values -------------------------------------------------------------------------

_DIGIT = re.compile(r"\d")


def mask_value(mask: Mask, value: object) -> object:
    """Apply one column mask to one value (None stays None)."""
    if value is None or mask in (Mask.FULL, Mask.FROM_BIRTH_YEAR):
        return value
    if mask is Mask.WITHHELD:
        return None
    if mask is Mask.YEAR_ONLY:
        if isinstance(value, dt.date):
            return f"{value.year:04d}"
        return str(value)[:4]
    text = str(value)
    if mask is Mask.NAME:
        return text[:1] + "*" * (len(text) - 1)
    if mask is Mask.RRN_FIRST8:
        return text[:8] + "*" * max(len(text) - 8, 0)
    if mask is Mask.PHONE_MIDDLE:
        parts = text.split("-")
        if len(parts) == 3:
            return "-".join((parts[0], "*" * len(parts[1]), parts[2]))
        # Unformatted numbers: keep the first three and the last four digits.
        return text[:3] + _DIGIT.sub("*", text[3:-4]) + text[-4:] if len(text) > 7 else "*" * 4
    return None  # an unknown mask fails closed


# --- PostgreSQL row-level security ------------------------------------------------------------

CONTEXT_STAKEHOLDER = "hyperbook.stakeholder_id"
CONTEXT_MAINTENANCE = "hyperbook.kb_maintenance"  # set (transaction-local) by the loader only
RLS_POLICY = "kb_vpd_select"
RLS_MAINTENANCE_POLICY = "kb_owner_maintenance"


def _rls_tables() -> list[tuple[str, str]]:
    """(table, USING expression) for each protected table, in dependency order."""
    customer = Customer._meta.db_table
    contract = Contract._meta.db_table
    payment = PremiumPayment._meta.db_table
    # The database decides role, branch and status from its own stakeholder row; the context only
    # names the stakeholder. Each subquery is uncorrelated, so it runs once per query, not per row.
    # Identifiers come from model metadata and constants, never from input.
    principal = (
        f"FROM {Stakeholder._meta.db_table} s"  # noqa: S608
        f" WHERE s.stakeholder_id = current_setting('{CONTEXT_STAKEHOLDER}', true)"
        f" AND s.status = '{Stakeholder.Status.ACTIVE.value}' AND s.role = '{{role}}'"
    )
    scope_sql = {
        RowScope.OWN: f"{customer}.planner_id = (SELECT s.stakeholder_id {principal})",
        RowScope.BRANCH: f"{customer}.branch_id = (SELECT s.branch_id {principal})",
        RowScope.ALL: f"EXISTS (SELECT 1 {principal})",
    }
    customer_using = " OR ".join(
        f"({scope_sql[scope].format(role=role)})" for role, scope in ROW_SCOPES.items()
    )
    # Contracts and payments are visible iff their customer is: these subqueries read
    # RLS-protected tables, so the customer policy applies inside them too.
    contract_using = f"{contract}.customer_id IN (SELECT customer_id FROM {customer})"  # noqa: S608
    payment_using = f"{payment}.contract_id IN (SELECT contract_id FROM {contract})"  # noqa: S608
    return [(customer, customer_using), (contract, contract_using), (payment, payment_using)]


def rls_statements() -> list[str]:
    """SQL that (re)creates the RLS policies; idempotent. Run by the table owner."""
    maintenance = f"current_setting('{CONTEXT_MAINTENANCE}', true) = 'on'"
    statements = []
    for table, using in _rls_tables():
        statements += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            # FORCE: the owner is bound too, so a read that forgets the reader role sees nothing.
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"DROP POLICY IF EXISTS {RLS_POLICY} ON {table}",
            f"CREATE POLICY {RLS_POLICY} ON {table} FOR SELECT TO PUBLIC USING ({using})",
            # The owner may write (the demo loader) only when it says so for one transaction.
            f"DROP POLICY IF EXISTS {RLS_MAINTENANCE_POLICY} ON {table}",
            f"CREATE POLICY {RLS_MAINTENANCE_POLICY} ON {table} FOR ALL TO CURRENT_USER"
            f" USING ({maintenance}) WITH CHECK ({maintenance})",
        ]
    return statements


def rls_drop_statements() -> list[str]:
    statements = []
    for table, _using in reversed(_rls_tables()):
        statements += [
            f"DROP POLICY IF EXISTS {RLS_POLICY} ON {table}",
            f"DROP POLICY IF EXISTS {RLS_MAINTENANCE_POLICY} ON {table}",
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
        ]
    return statements


_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def reader_role() -> str:
    """The PostgreSQL role KB reads run as (settings.KB_DB_READER_ROLE), checked to be plain."""
    name = settings.KB_DB_READER_ROLE or ""
    if not _ROLE_NAME.match(name):
        raise ImproperlyConfigured(
            "KB_DB_READER_ROLE must be a lower-case PostgreSQL role name ([a-z_][a-z0-9_]*)"
        )
    return name
