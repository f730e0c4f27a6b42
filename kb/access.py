"""Why a stakeholder sees what it sees: its row scope, its rows counted, its masked columns, and
whether one record is visible to it and by which rule.

Worked out by the code that answers /mcp, not by a second copy of the rules: the policy decides
the scope and the masks (kb.policy), and every count and visibility check is a plan run by the
data layer (kb.vpd.execute_plan) as that stakeholder, under its row filter and, on PostgreSQL,
its reader role and row-level security.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import get_language, gettext, ngettext
from django.utils.translation import gettext_lazy as _

from kb.catalogue import CONTRACTS, CUSTOMERS, ENTITIES, PAYMENTS
from kb.josa import josa_in
from kb.models import Stakeholder
from kb.policy import (
    COMPARABLE_MASKS,
    Mask,
    PolicyRefused,
    RowScope,
    check_stakeholder_allowed,
    column_mask,
    role_label,
)
from kb.vpd import execute_plan

# How each mask shows a value, in words an operator reads.
MASK_WORDS = {
    Mask.NAME: _("성 한 글자만 보임 (김**)"),
    Mask.PHONE_MIDDLE: _("가운데 자리를 가림 (010-****-5678)"),
    Mask.RRN_FIRST8: _("앞 8자리만 보임 (870211-2******)"),
    Mask.YEAR_ONLY: _("연도만 보임 (1987)"),
    Mask.WITHHELD: _("반환하지 않음"),
    Mask.FROM_BIRTH_YEAR: _("출생 연도로만 계산"),
}


@dataclass(frozen=True)
class EntityCount:
    entity: str
    label: str
    count: int


@dataclass(frozen=True)
class ColumnRule:
    column: str
    label: str
    entities: tuple[str, ...]  # entity labels that carry the column
    mask: Mask
    how: str
    comparable: bool  # may it be filtered, sorted, grouped or aggregated?


@dataclass(frozen=True)
class StakeholderAccess:
    stakeholder: Stakeholder
    role_label: str
    status_label: str
    refused: str  # why it may see nothing at all ("" when it may query)
    scope_rule: str  # the row rule in words
    counts: tuple[EntityCount, ...]
    summary: str  # "담당 고객 30명, 그 계약 58건, 납입 453건"
    masked: tuple[ColumnRule, ...]


@dataclass(frozen=True)
class RecordVisibility:
    entity: str  # "" when the id names no entity's key format
    record_id: str
    visible: bool
    rule: str  # which rule decides, in words


def stakeholder_access(*, stakeholder: Stakeholder) -> StakeholderAccess:
    label = role_label(stakeholder.role)
    status = str(dict(Stakeholder.Status.choices).get(stakeholder.status, stakeholder.status))
    try:
        scope = check_stakeholder_allowed(stakeholder)
    except PolicyRefused as exc:
        return StakeholderAccess(stakeholder, label, status, exc.message, "", (), "", ())
    language = get_language()
    counts = tuple(
        EntityCount(
            entity, _heading(ENTITIES[entity].label_in(language)), _count(stakeholder, entity)
        )
        for entity in (CUSTOMERS, CONTRACTS, PAYMENTS)
    )
    customers, contracts, payments = (c.count for c in counts)
    words = {
        "customers": ngettext("고객 %(n)s명", "고객 %(n)s명", customers) % {"n": f"{customers:,}"},
        "contracts": ngettext("계약 %(n)s건", "계약 %(n)s건", contracts) % {"n": f"{contracts:,}"},
        "payments": ngettext("납입 %(n)s건", "납입 %(n)s건", payments) % {"n": f"{payments:,}"},
        "branch": _branch_name(stakeholder),
    }
    if scope is RowScope.OWN:
        summary = gettext("담당 %(customers)s, 그 %(contracts)s, %(payments)s") % words
    elif scope is RowScope.BRANCH:
        summary = gettext("%(branch)s %(customers)s, 그 %(contracts)s, %(payments)s") % words
    else:
        summary = gettext("전체 %(customers)s, 전체 %(contracts)s, %(payments)s") % words
    return StakeholderAccess(
        stakeholder=stakeholder,
        role_label=label,
        status_label=status,
        refused="",
        scope_rule=_scope_rule(scope, stakeholder),
        counts=counts,
        summary=summary,
        masked=_masked_columns(stakeholder.role),
    )


def record_visibility(
    *, stakeholder: Stakeholder, record_id: str, name_the_customer: bool = False
) -> RecordVisibility:
    """Whether `stakeholder` can see the customer, contract or payment `record_id`, and why.

    The rule is said without the record's contents: which customer a contract or payment belongs
    to is named only with `name_the_customer`, for a viewer who may read the KB's rows anyway."""
    record_id = record_id.strip().upper()[:32]  # ids are upper case: c0001 means C0001
    entity = _entity_of(record_id)
    if not entity:
        return RecordVisibility(
            "", record_id, False, gettext("고객(C…), 계약(K…) 또는 납입(PM…) ID를 입력하세요.")
        )
    try:
        scope = check_stakeholder_allowed(stakeholder)
    except PolicyRefused as exc:
        return RecordVisibility(entity, record_id, False, exc.message)
    spec = ENTITIES[entity]
    answer = execute_plan(
        {
            "entity": entity,
            # The record's customer is what the rule decides by (contracts and payments follow it).
            "fields": list(dict.fromkeys([spec.key, "customer_id"])),
            "filters": [{"field": spec.key, "op": "eq", "value": record_id}],
            "limit": 1,
        },
        stakeholder=stakeholder,
    )
    rule = _scope_rule(scope, stakeholder)
    follows = (
        ""
        if entity == CUSTOMERS
        else " "
        + gettext("%(entity)s 그 고객을 따릅니다.")
        % {"entity": josa_in(get_language(), spec.label_in(get_language()), "은/는")}
    )
    if not answer["rows"]:
        hidden = gettext(
            "보이지 않음: %(rule)s%(follows)s %(record)s 이 범위에 없습니다"
            " (없는 ID이거나 범위 밖의 기록)."
        )
        return RecordVisibility(
            entity,
            record_id,
            False,
            hidden
            % {
                "rule": rule,
                "follows": follows,
                "record": josa_in(get_language(), record_id, "은/는"),
            },
        )
    names = {
        "customer": answer["rows"][0]["customer_id"],
        "planner": stakeholder.pk,
        "branch": _branch_name(stakeholder),
    }
    if scope is RowScope.OWN and name_the_customer:
        because = gettext("고객 %(customer)s의 담당 설계사가 %(planner)s입니다") % names
    elif scope is RowScope.OWN:
        because = gettext("이 기록의 고객은 담당 설계사가 %(planner)s입니다") % names
    elif scope is RowScope.BRANCH and name_the_customer:
        subject = josa_in(get_language(), names["customer"], "이/가")
        because = gettext("고객 %(customer)s %(branch)s 고객입니다") % {
            **names,
            "customer": subject,
        }
    elif scope is RowScope.BRANCH:
        because = gettext("이 기록의 고객이 %(branch)s 고객입니다") % names
    else:
        because = gettext("본사 분석가는 모든 고객을 봅니다")
    visible = gettext("보임: %(because)s.%(follows)s")
    return RecordVisibility(
        entity, record_id, True, visible % {"because": because, "follows": follows}
    )


def _count(stakeholder: Stakeholder, entity: str) -> int:
    answer = execute_plan(
        {"entity": entity, "aggregates": [{"fn": "count", "field": None, "as": "n"}]},
        stakeholder=stakeholder,
    )
    return int(answer["rows"][0]["n"]) if answer["rows"] else 0


def _scope_rule(scope: RowScope, stakeholder: Stakeholder) -> str:
    if scope is RowScope.OWN:
        return gettext("설계사는 자신(%(planner)s)이 담당하는 고객과 그 계약·납입만 봅니다.") % {
            "planner": stakeholder.pk
        }
    if scope is RowScope.BRANCH:
        return gettext("지점장은 자신의 지점(%(branch)s) 고객과 그 계약·납입만 봅니다.") % {
            "branch": _branch_name(stakeholder)
        }
    return gettext("본사 분석가는 모든 고객과 계약·납입을 봅니다 (개인정보 열은 가려짐).")


def _heading(label: str) -> str:
    return label[:1].upper() + label[1:]  # "customer ID" -> "Customer ID"; Korean is unchanged


def _branch_name(stakeholder: Stakeholder) -> str:
    branch = stakeholder.branch
    return f"{branch.branch_name}({branch.pk})" if branch else str(stakeholder.branch_id)


def _masked_columns(role: str) -> tuple[ColumnRule, ...]:
    by_column: dict[str, tuple[Mask, list[str], str]] = {}
    language = get_language()
    for entity, spec in ENTITIES.items():
        for name, field in spec.fields.items():
            mask = column_mask(role, entity, name)
            if mask is None or mask is Mask.FULL:
                continue
            _mask, entities, _label = by_column.setdefault(
                name, (mask, [], _heading(field.label_in(language)))
            )
            entities.append(spec.label_in(language))
    return tuple(
        ColumnRule(
            column=name,
            label=label,
            entities=tuple(entities),
            mask=mask,
            how=str(MASK_WORDS.get(mask, mask)),
            comparable=mask in COMPARABLE_MASKS,
        )
        for name, (mask, entities, label) in by_column.items()
    )


def _entity_of(record_id: str) -> str:
    """The entity whose key the id's shape is (C0001, K00001, PM000001); "" for none."""
    if record_id.startswith("PM"):
        return PAYMENTS
    if record_id.startswith("K"):
        return CONTRACTS
    if record_id.startswith("C"):
        return CUSTOMERS
    return ""
