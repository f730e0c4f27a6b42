"""The KB VPD policy, defined once: which rows each role sees and how each column is shown.

Everything that enforces the policy reads it from here: the data layer's row filter (Q objects), the
PostgreSQL row-level security policies (`rls_statements`) and the column masks applied to answers.

Decisions beyond the dataset README: a column may be filtered, sorted, grouped or aggregated only
when the role sees it in full (otherwise the answer would reveal the hidden value); age and
age_group derive from birth_date and for hq_analyst are computed from the birth YEAR only
(age = as-of year - birth year), which tells nothing the year does not.
"""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import Q
from django.utils.translation import get_language, gettext, pgettext_lazy

from kb.catalogue import ENTITIES
from kb.models import Contract, Customer, PremiumPayment, Stakeholder

PLANNER = Stakeholder.Role.PLANNER.value
BRANCH_MANAGER = Stakeholder.Role.BRANCH_MANAGER.value
HQ_ANALYST = Stakeholder.Role.HQ_ANALYST.value


class PolicyRefused(PermissionDenied):
    """The stakeholder may not query the KB at all (HTTP 403); raised before any KB query."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.message = message
        self.reason = reason  # machine-readable: unknown_stakeholder, suspended, unknown_role, …

    def __str__(self) -> str:
        return self.message


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


def check_stakeholder_allowed(stakeholder: Stakeholder | None) -> RowScope:
    """The stakeholder's row scope; PolicyRefused (no query is made) if it may see nothing."""
    if stakeholder is None or not stakeholder.pk:
        raise PolicyRefused(
            gettext("알 수 없는 사용자입니다: 조회 권한 없음"), reason="unknown_stakeholder"
        )
    refusal = query_refusal(
        role=stakeholder.role, status=stakeholder.status, branch_id=stakeholder.branch_id
    )
    if refusal is not None:
        raise refusal
    return ROW_SCOPES[stakeholder.role]


def visible_customers_q(stakeholder: Stakeholder, *, customer_path: str = "") -> Q:
    """The row policy as an ORM filter; `customer_path` leads from the entity to its customer."""
    scope = check_stakeholder_allowed(stakeholder)
    prefix = f"{customer_path}__" if customer_path else ""
    if scope is RowScope.OWN:
        return Q(**{f"{prefix}planner_id": stakeholder.pk})
    if scope is RowScope.BRANCH:
        return Q(**{f"{prefix}branch_id": stakeholder.branch_id})
    return Q()


def column_mask(role: str, entity: str, column: str) -> Mask | None:
    """How `role` sees `column` of `entity`; None if the policy does not know it (not returned)."""
    if role not in ROW_SCOPES or column not in ENTITY_COLUMNS.get(entity, ()):
        return None
    rules = MASKED_COLUMNS.get(column)
    if rules is None:
        return Mask.FULL
    return rules.get(role)


class ConditionRefused(PermissionDenied):
    """A question's condition, sort, grouping or aggregate uses a column the asker sees masked.

    Answering it would reveal the hidden value (a count of "RRNs starting with 87" narrows them
    down), so the question is refused and the message says which condition and why, in the
    active language (kb.answering activates the question's).
    """

    def __init__(self, *, role: str, entity: str, field: str, use: str):
        spec = ENTITIES[entity].fields[field]
        message = gettext(
            "%(label)s(%(field)s) %(use)s은(는) 처리할 수 없습니다: %(role)s 권한에서는 이 열이 "
            "가려져 있어, 조건·정렬·그룹·집계에 쓰면 가려진 값이 드러납니다. "
            "이 조건 없이 다시 물어봐 주세요."
        ) % {
            "label": spec.label_in(get_language()),
            "field": field,
            "use": _USES.get(use, _USES["filter"]),
            "role": role_label(role),
        }
        super().__init__(message)
        self.message, self.field, self.use = message, field, use

    def __str__(self) -> str:
        return self.message


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
    name = getattr(settings, "KB_DB_READER_ROLE", "") or ""
    if not _ROLE_NAME.match(name):
        raise ImproperlyConfigured(
            "KB_DB_READER_ROLE must be a lower-case PostgreSQL role name ([a-z_][a-z0-9_]*)"
        )
    return name
