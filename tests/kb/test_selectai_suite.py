"""The Select AI prompt suite (tests/kb/selectai_suite.py), one test per question.

Each case's truth is computed from the CSV files with plain Python. Cases the parser gets wrong
today are listed in KNOWN_MISSES and xfailed strictly: a fixed case fails until it is removed.
Policy-exactness is checked separately for every answer and is never xfailed.
"""

import json

import pytest

from kb.answers import ANSWER_JSON_SCHEMA
from tests.kb.selectai_suite import CASES, FAMILIES, by_family
from tests.kb.truth import assert_policy_exact

NO_REFUSAL = "no ConditionRefused yet: the masked-column condition is dropped silently"
# case id -> what the parser does instead (from answer["interpretation"]["plan"]).
KNOWN_MISSES: dict[str, str] = {
    # paraphrase
    "paraphrase-13": "유지계약목록 (no spaces) is not split: no plan, help answer",
    # range
    "range-11": "English 'at least 100000' is not read: no filter, every contract",
    "range-12": "English 'under 20000' is not read: no filter, every contract",
    # age_birth: birth years read as joined_on, or not at all
    "age_birth-01": "1987년생 -> joined_on between 1987-01-01 and 1987-12-31",
    "age_birth-02": "생년월일이 1987-02-11 -> joined_on = 1987-02-11",
    "age_birth-03": "1990년 이후 출생 -> joined_on within 1990 (field and 이후 both lost)",
    "age_birth-04": "87년생 -> joined_on in the last 87 years (최근 87년)",
    "age_birth-05": "80년대생 is not read: no filter",
    "age_birth-09": "'born after 1990' is not read: no filter",
    "age_birth-10": "'born in 1978' is not read: no filter",
    "age_birth-12": "1970년 이전 출생 -> joined_on within 1970 (field and 이전 both lost)",
    "age_birth-16": "1990년대생 is not read: no filter",
    # join_year
    "join_year-04": "'joined in 2023' is not read: no filter",
    "join_year-07": "2023년 이후 가입 -> joined_on within 2023 only (이후 dropped)",
    "join_year-08": "2021년 이전에 가입 -> joined_on within 2021 only (이전 dropped)",
    # gender
    "gender-11": "성별 계약 건수 -> one total count: contracts cannot group by gender",
    # negation: the value is kept as an eq filter, never complemented
    "negation-01": "자동차보험을 제외한 -> product_code eq AUTO-01",
    "negation-02": "VIP 말고 -> grade eq VIP",
    "negation-03": "유지 아닌 -> status eq 유지",
    "negation-04": "이외 read as customer_name eq '이외' + branch_id eq BR-GN: no rows",
    "negation-05": "이외 read as customer_name (masked for hq): help answer, no plan",
    "negation-06": "건강 빼고 -> category eq 건강",
    "negation-07": "'except auto' -> category eq 자동차",
    "negation-08": "'other than VIP' -> grade eq VIP",
    "negation-09": "'not active' -> status eq 유지",
    "negation-10": "'excluding lapsed' -> status eq 실효",
    "negation-11": "해지 제외 -> status eq 해지",
    "negation-12": "제외 read as customer_name (masked for hq): help answer, no plan",
    "negation-13": "KB암보험 빼고 -> product_code eq HLTH-02",
    "negation-14": "미납 제외 -> status eq 미납",
    "negation-15": "제외 read as customer_name eq '제외' + gender eq F: no rows",
    "negation-16": "종로지점 말고 지점별 -> branch_id eq BR-JR, one group",
    "negation-17": "만기 아닌 계약 건수 -> status eq 만기 (23, want 89)",
    # cross_entity: a customer condition on contracts/payments
    "cross_entity-03": "여성 ignored on contracts (interpretation.ignored: 성별 여성)",
    "cross_entity-04": "30대 ignored on contracts: every contract",
    "cross_entity-06": "남성 ignored on payments: every unpaid row",
    "cross_entity-07": "2024년에 가입한 고객 -> contract start_date in 2024, not joined_on",
    "cross_entity-08": "1987년생 고객의 계약 -> contract start_date in 1987: no rows",
    "cross_entity-14": "40대 and 여성 both ignored: counts all 427 contracts",
    # ranking
    "ranking-01": "가장 최근에 가입한 5명 (no entity word): no plan, help answer",
    "ranking-04": "가장 오래된 계약 -> ordered by contract_id, not start_date",
    "ranking-09": "가장 젊은 not read: first 3 by customer_id",
    "ranking-11": "가입한 지 가장 오래된 -> customer_name eq '오래된': no rows",
    # masked: refusals (ConditionRefused) and allowed conditions
    **dict.fromkeys([f"masked-{n:02d}" for n in range(1, 12)], NO_REFUSAL),
    "masked-12": "hq 1987년생 고객 수 -> joined_on in 1987: count 0 (want 6)",
    "masked-13": "hq 1990년 이후 출생 고객 수 -> joined_on in 1990: count 0",
    "masked-15": "planner phone prefix condition dropped: all 30 customers",
}


def _param(case):
    marks = []
    if case.id in KNOWN_MISSES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[case.id]))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_the_answer_is_what_the_dataset_says(kb, case):
    case.run()


@pytest.mark.parametrize("case", [c for c in CASES if not c.refusal], ids=lambda c: c.id)
def test_every_answer_is_policy_exact(kb, case):
    answer = case.ask()
    assert_policy_exact(answer, case.stakeholder_id)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(json.dumps(answer)), ANSWER_JSON_SCHEMA)


def test_the_suite_is_large_and_spread_over_families_and_roles():
    assert len(CASES) >= 150
    assert set(by_family()) == set(FAMILIES)
    for family, cases in by_family().items():
        assert len(cases) >= 10, family
        askers = {c.stakeholder_id[:4] for c in cases}
        assert askers == {"KB-P", "KB-M", "KB-H"}, (family, askers)
    assert set(KNOWN_MISSES) <= {c.id for c in CASES}
