"""The KB's entities, written out once: every other module derives its view of them from here.

The plan validator (kb.plans), the policy's column map (kb.policy), the parser (kb.selectai), the
answer's output schema and the tool's declaration (mcpserver.tool, registry.declarations) read the
entity names, fields, kinds, labels, default columns, limits and the tool name from this module.
It imports nothing from Django, so the parser and tools can use it without settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

TOOL_NAME = "ords.query.kb_select_ai_vpd"
MIN_LIMIT, MAX_LIMIT = 1, 100
TOOL_DEFAULT_LIMIT = 50  # the tool's `limit` when a caller leaves it out
PLAN_DEFAULT_LIMIT = 20  # a plan's `limit` when a plan leaves it out


def clamp_limit(value: int | None, *, default: int = TOOL_DEFAULT_LIMIT) -> int:
    """A row limit brought into MIN_LIMIT..MAX_LIMIT; `default` when none was given."""
    if value is None:
        return default
    return min(max(int(value), MIN_LIMIT), MAX_LIMIT)


CUSTOMERS, CONTRACTS, PAYMENTS = "customers", "contracts", "premium_payments"
# The statuses the data holds, per entity (contracts.csv, premium_payments.csv).
CONTRACT_STATUSES: tuple[str, ...] = ("유지", "실효", "해지", "만기")
PAYMENT_STATUSES: tuple[str, ...] = ("납입", "미납")


class Kind(StrEnum):
    STR = "str"
    INT = "int"
    DATE = "date"  # "YYYY-MM-DD"
    MONTH = "month"  # "YYYY-MM", stored as text
    AGE = "age"  # int, derived from birth_date at the as-of date
    AGE_GROUP = "age_group"  # "30대", derived from birth_date


@dataclass(frozen=True)
class FieldSpec:
    name: str
    label: str  # Korean, as answers show it
    label_en: str
    kind: Kind
    path: str  # ORM path from the entity's model; for derived fields, the birth_date path
    nullable: bool = False

    def label_in(self, language: str | None) -> str:
        """The label in `language` ("en", "en-gb", "ko", …): English or else Korean."""
        return self.label_en if (language or "").startswith("en") else self.label

    @property
    def derived(self) -> bool:
        return self.kind in (Kind.AGE, Kind.AGE_GROUP)


@dataclass(frozen=True)
class EntitySpec:
    name: str
    label: str
    label_en: str
    model_label: str  # "kb.Customer": resolved by kb.plans, which may import Django
    key: str  # the natural key field, always returned by row queries
    customer_path: str  # ORM path from the model to its Customer ("" for customers)
    fields: dict[str, FieldSpec]
    defaults: tuple[str, ...]  # columns of a row query whose `fields` is []
    identity: tuple[str, ...]  # columns that name a row, shown before the columns asked for
    date_field: str  # the date a list is sorted by when a question asks for "newest first"
    columns: frozenset[str] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "columns", frozenset(self.fields))

    def label_in(self, language: str | None) -> str:
        return self.label_en if (language or "").startswith("en") else self.label

    @property
    def model(self):
        from django.apps import apps  # only the data layer asks; the catalogue stays Django-free

        return apps.get_model(self.model_label)


def _f(name: str, label: str, label_en: str, kind: Kind, path: str | None = None, **kw):
    return FieldSpec(name=name, label=label, label_en=label_en, kind=kind, path=path or name, **kw)


def _customer_fields(to_customer: str) -> list[FieldSpec]:
    """A customer's columns, reached from an entity through `to_customer` ("" from customers)."""
    c = f"{to_customer}__" if to_customer else ""
    birth = f"{c}birth_date"
    return [
        _f("customer_id", "고객 ID", "customer ID", Kind.STR, f"{to_customer}_id" if c else None),
        _f("customer_name", "고객명", "customer name", Kind.STR, f"{c}customer_name"),
        _f("planner_id", "설계사 ID", "planner ID", Kind.STR, f"{c}planner_id"),
        _f("planner_name", "설계사명", "planner", Kind.STR, f"{c}planner__name"),
        _f("branch_id", "지점 ID", "branch ID", Kind.STR, f"{c}branch_id"),
        _f("branch_name", "지점명", "branch", Kind.STR, f"{c}branch__branch_name"),
        _f("region", "지역", "region", Kind.STR, f"{c}branch__region"),
        _f("grade", "고객 등급", "grade", Kind.STR, f"{c}grade"),
        _f("gender", "성별", "gender", Kind.STR, f"{c}gender"),
        _f("birth_date", "생년월일", "birth date", Kind.DATE, birth),
        _f("joined_on", "가입일", "join date", Kind.DATE, f"{c}joined_on"),
        _f("age", "나이", "age", Kind.AGE, birth),
        _f("age_group", "연령대", "age group", Kind.AGE_GROUP, birth),
    ]


def _product_fields(to_contract: str) -> list[FieldSpec]:
    p = f"{to_contract}__" if to_contract else ""
    return [
        _f("product_code", "상품 코드", "product code", Kind.STR, f"{p}product_id"),
        _f("product_name", "상품명", "product", Kind.STR, f"{p}product__product_name"),
        _f("category", "상품 분류", "category", Kind.STR, f"{p}product__category"),
    ]


def _entity(name, label, label_en, model_label, key, customer_path, fields, **kw) -> EntitySpec:
    options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    return EntitySpec(
        name=name,
        label=label,
        label_en=label_en,
        model_label=model_label,
        key=key,
        customer_path=customer_path,
        fields={spec.name: spec for spec in fields},
        **options,
    )


ENTITIES: dict[str, EntitySpec] = {
    CUSTOMERS: _entity(
        CUSTOMERS,
        "고객",
        "customers",
        "kb.Customer",
        "customer_id",
        "",
        [
            *_customer_fields(""),
            _f("phone", "전화번호", "phone", Kind.STR),
            _f("rrn", "주민등록번호", "resident registration number", Kind.STR),
        ],
        defaults=["customer_id", "customer_name", "gender", "age", "phone", "grade"]
        + ["planner_name", "branch_name", "joined_on"],
        identity=["customer_id", "customer_name"],
        date_field="joined_on",
    ),
    CONTRACTS: _entity(
        CONTRACTS,
        "계약",
        "contracts",
        "kb.Contract",
        "contract_id",
        "customer",
        [
            _f("contract_id", "계약 ID", "contract ID", Kind.STR),
            *_customer_fields("customer"),
            *_product_fields(""),
            _f("status", "계약 상태", "contract status", Kind.STR),
            _f("start_date", "계약일", "start date", Kind.DATE),
            _f("end_date", "만기일", "end date", Kind.DATE),
            _f("monthly_premium", "월 보험료", "monthly premium", Kind.INT),
            _f("sum_insured", "보험 가입금액", "sum insured", Kind.INT),
            _f("payment_day", "납입일", "payment day", Kind.INT),
        ],
        defaults=["contract_id", "customer_id", "customer_name", "product_name", "status"]
        + ["start_date", "end_date", "monthly_premium", "sum_insured"],
        identity=["contract_id", "customer_id", "customer_name", "product_name"],
        date_field="start_date",
    ),
    PAYMENTS: _entity(
        PAYMENTS,
        "보험료 납입",
        "premium payments",
        "kb.PremiumPayment",
        "payment_id",
        "contract__customer",
        [
            _f("payment_id", "납입 ID", "payment ID", Kind.STR),
            _f("contract_id", "계약 ID", "contract ID", Kind.STR),
            *_customer_fields("contract__customer"),
            *_product_fields("contract"),
            _f("due_month", "납입월", "due month", Kind.MONTH),
            _f("due_date", "납입 기일", "due date", Kind.DATE),
            _f("amount", "금액", "amount", Kind.INT),
            _f("status", "납입 상태", "payment status", Kind.STR),
            _f("paid_date", "납입일", "paid date", Kind.DATE, nullable=True),
        ],
        defaults=["payment_id", "contract_id", "customer_id", "customer_name", "product_name"]
        + ["due_month", "amount", "status", "paid_date"],
        identity=["payment_id", "contract_id", "customer_name", "due_month"],
        date_field="due_month",
    ),
}


def field_names(entity: str) -> frozenset[str]:
    return ENTITIES[entity].columns


# -- conventions: what everyday words mean in the KB's terms, written once ---------------------
# The reader maps these words, the proof-reader (kb.proof) checks that a plan carries them, and
# an answer that used one says so in its notes.

# Money received is paid rows only: "납입 건수", "납입 총액", "들어온 보험료", "받은 보험료",
# "collected", "received" count or sum the payments whose status is 납입, never the unpaid ones.
PAID_WORDS = (r"납입\s?건수", r"납입\s?총액", "들어온", "받은", r"\bcollected\b", r"\breceived\b")
PAID_STATUS = "납입"
# "만기 예정 계약" (maturing, with no period named): in-force contracts maturing in the next
# three months. "가장 임박한 만기" asks for the nearest one and gets no window.
EXPIRING_SOON_MONTHS = 3

# Premium totals and premium rankings over contracts count in-force contracts (유지) unless the
# question names a status or asks for all of them: a cancelled, lapsed or matured contract no
# longer brings in its monthly premium, and the people who ask mean what is coming in now.
# Counts and lists of contracts keep every status. Each answer says which statuses it covers.
IN_FORCE_STATUS = "유지"
IN_FORCE_MEASURES = frozenset({"monthly_premium", "sum_insured"})
# Words that ask for every status, where a default would pick one ("모든 상태", "all statuses").
ALL_STATUS_WORDS = (
    r"(?:모든|전체)\s?(?:계약\s?|납입\s?)?상태",
    r"상태\s?(?:무관|상관\s?없|와\s?무관|에\s?관계\s?없)",
    r"\b(?:all|every|any)\s+(?:contract\s+|payment\s+)?status(?:es)?\b",
    r"\bregardless\s+of\s+(?:the\s+)?status\b",
    r"\bwhatever\s+(?:the|their|its)\s+status\b",
)


def in_force_by_default(plan: dict) -> bool:
    """Whether `plan` is a premium total or premium ranking over contracts, which counts
    in-force contracts unless the question says otherwise."""
    if plan.get("entity") != CONTRACTS or "status" in (plan.get("group_by") or ()):
        return False  # grouped by status: every status is shown as its own row
    aggregates = plan.get("aggregates") or ()
    summed = {a.get("field") for a in aggregates if a.get("fn") != "count"}
    ranked = {o.get("field") for o in plan.get("order_by") or ()}
    return bool((summed | ranked) & IN_FORCE_MEASURES)


# Coded values as stored, with the English an English answer glosses them with; the data stays
# as it is ("미납 (unpaid)").
VALUE_GLOSSES = {
    "유지": "in force", "해지": "cancelled", "실효": "lapsed", "만기": "matured",
    "납입": "paid", "미납": "unpaid", "일반": "standard", "자동차": "auto", "건강": "health",
    "생명": "life", "상해": "accident", "F": "female", "M": "male",
}  # fmt: skip
