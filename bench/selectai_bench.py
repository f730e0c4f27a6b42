"""Select AI prompts per second (parse -> plan -> answer) on SQLite, and where the time goes.

    .venv/bin/python bench/selectai_bench.py                # ~3 s per measurement
    .venv/bin/python bench/selectai_bench.py --seconds 10
    .venv/bin/python bench/selectai_bench.py --rounds 5     # mean and spread over 5 processes

The database is a throwaway SQLite file in a temp dir, migrated and loaded with `load_kb_demo`, run
in a child process with DJANGO_SETTINGS_MODULE=hyperbook.settings.test and the built-in parser.
Reported: the cold start (warm_up: Kiwi's model and the vocabulary), end-to-end answer_question
throughput over a mix of question families and stakeholders, and the split of each answer's time
between parsing (prompt -> plan), executing (plan -> VPD-filtered answer) and the rest (stakeholder
lookup, policy check). Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import childproc

ROOT = Path(__file__).resolve().parent.parent

# Every parser family, all three roles, rows and aggregates: templates crossed with values, and
# each prompt asked by a stakeholder in turn (planners, branch managers, hq), so nothing that
# remembered a prompt's text or one plan could make the number.
STAKEHOLDERS = ("KB-P-001", "KB-M-001", "KB-H-001", "KB-P-003", "KB-M-002", "KB-P-005", "KB-M-003")
TEMPLATES = [
    (
        "{} 미납 보험료",
        ["이번 달", "지난달", "2026년 3월", "2026년 5월", "작년 12월", "2026년 1월"],
    ),
    ("{} 고객의 유지 계약", ["VIP", "일반", "여성", "남성"]),
    ("고객 {} 상세 정보", ["C0001", "C0017", "C0042", "C0105", "C0150", "C0201", "C0088"]),
    (
        "{}",
        ["지점별 보험료 합계", "설계사별 월보험료 합계", "상품별 계약 건수", "연령대별 고객 수"]
        + ["등급별 월보험료 합계", "지점별 고객 수", "이번 달 미납 고객 수", "만기 아닌 계약 건수"],
    ),
    ("보험료 상위 {}명 고객", ["3", "5", "10"]),
    (
        "{} 고객",
        ["20대 여성", "30대 여성", "40대 남성", "50대 남성", "60대 이상", "전체", "30대 남성"],
    ),
    ("최근 {} 납입 내역", ["3개월 자동차보험", "6개월 건강보험", "2개월 암보험", "3개월"]),
    ("월보험료 {}원 이상 계약 수", ["5만", "10만", "200000"]),
    ("{}년 가입 고객", ["2021", "2022", "2023", "2024", "2025", "2026"]),
    ("{} 이외 고객 수", ["강남지점", "종로지점", "해운대지점"]),
    (
        "{}",
        ["담당 고객의 보험료 상세를 보여줘", "고객 전화번호 목록", "다음 달 만기 예정 계약"]
        + ["자동차보험을 제외한 계약 목록", "미납이 있는 고객", "VIP 고객의 해지 계약"]
        + ["오늘 서울 날씨 어때?"],
    ),
    (
        "{}",
        ["total premiums by branch", "contract count by product", "top 5 customers by premium"]
        + ["show unpaid premiums this month", "customers who joined in 2023"]
        + ["customers born after 1990", "active contracts of VIP customers"]
        + ["number of customers by branch", "contracts with monthly premium under 20000"],
    ),
]
PROMPTS = [
    (STAKEHOLDERS[i % len(STAKEHOLDERS)], prompt)
    for i, prompt in enumerate(
        template.format(value) for template, values in TEMPLATES for value in values
    )
]
LIMIT = 50
STAGES = ("parse", "execute", "other")


def child(seconds: float) -> None:
    """Runs inside the child process: migrate, load, warm up, then time."""
    import io

    import django

    django.setup()
    from django.core.management import call_command

    from kb.answering import answer_question, warm_up

    call_command("migrate", verbosity=0)
    call_command("load_kb_demo", stdout=io.StringIO())

    started = time.perf_counter()
    warm_up()
    warm_up_seconds = time.perf_counter() - started

    plans = []
    for stakeholder_id, prompt in PROMPTS:  # warm caches (query compilation, lexicon, ...)
        answer = answer_question(stakeholder_id=stakeholder_id, prompt=prompt, limit=LIMIT)
        plan = answer["interpretation"].get("plan")
        plans.append(json.dumps(plan, sort_keys=True) if plan else None)
    answered = [plan for plan in plans if plan]
    mix = {"plans": len(answered), "distinct_plans": len(set(answered)), "help": plans.count(None)}

    # End to end, as the MCP tool calls it.
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        stakeholder_id, prompt = PROMPTS[count % len(PROMPTS)]
        answer_question(stakeholder_id=stakeholder_id, prompt=prompt, limit=LIMIT)
        count += 1
    end_to_end = {"per_second": count / elapsed, "answers": count}

    # The same loop with the two stages answer_question calls timed where they are looked up.
    import kb.answering as answering

    per_prompt = {
        f"{sid} {prompt}": dict.fromkeys(STAGES, 0.0) | {"n": 0} for sid, prompt in PROMPTS
    }
    spent = dict.fromkeys(STAGES, 0.0)

    def timed(stage, function):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[stage] += time.perf_counter() - t0

        return run

    answering.parse_prompt = timed("parse", answering.parse_prompt)
    # Executing a plan: the policy's decision on it, then the data layer's read.
    answering.police = timed("execute", answering.police)
    answering.execute = timed("execute", answering.execute)
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        stakeholder_id, prompt = PROMPTS[count % len(PROMPTS)]
        spent.update(dict.fromkeys(STAGES, 0.0))
        t0 = time.perf_counter()
        answer_question(stakeholder_id=stakeholder_id, prompt=prompt, limit=LIMIT)
        total = time.perf_counter() - t0
        figures = per_prompt[f"{stakeholder_id} {prompt}"]
        figures["parse"] += spent["parse"]
        figures["execute"] += spent["execute"]
        figures["other"] += total - spent["parse"] - spent["execute"]
        figures["n"] += 1
        count += 1

    result = {
        "warm_up_seconds": warm_up_seconds,
        "end_to_end": end_to_end,
        "mix": mix,
        "per_prompt": per_prompt,
    }
    childproc.print_result(result)


def run_child(database_url: str, seconds: float) -> dict | None:
    return childproc.run_child(
        __file__,
        database_url=database_url,
        seconds=seconds,
        env={"KB_QUERY_BACKEND": "embedded", "SELECT_AI_PROVIDER": "builtin"},
    )


def report(result: dict) -> None:
    e2e = result["end_to_end"]
    print(f"Select AI on SQLite, built-in parser, limit {LIMIT}, {len(PROMPTS)} questions in turn")
    print(f"  cold start (warm_up: Kiwi + vocabulary) {result['warm_up_seconds'] * 1000:8.0f} ms")
    print(
        f"  end to end (answer_question)  {e2e['per_second']:8.1f} prompts/s"
        f"  {1000 / e2e['per_second']:6.2f} ms/prompt  ({e2e['answers']} answers)"
    )
    mix = result["mix"]
    print(
        f"  the questions: {mix['plans']} answered from a plan ({mix['distinct_plans']} distinct"
        f" plans), {mix['help']} help answers"
    )
    rows = result["per_prompt"]
    totals, n = stage_means(result), sum(f["n"] for f in rows.values())
    total = sum(totals.values())
    shares = "  ".join(f"{stage} {totals[stage] / total:5.1%}" for stage in STAGES)
    means = " + ".join(f"{1000 * totals[stage]:.2f}" for stage in STAGES)
    print(f"  share of time ({n} answers)   {shares}  (mean ms {means})")
    print("  per question, mean ms:  parse  execute  other")
    for name, f in rows.items():
        if f["n"]:
            print(
                f"    {1000 * f['parse'] / f['n']:18.2f} {1000 * f['execute'] / f['n']:8.2f}"
                f" {1000 * f['other'] / f['n']:6.2f}  {name}"
            )


def stage_means(result: dict) -> dict[str, float]:
    """Mean seconds per answer of each stage."""
    rows = result["per_prompt"].values()
    n = sum(f["n"] for f in rows)
    return {stage: sum(f[stage] for f in rows) / n for stage in STAGES}


def report_rounds(results: list[dict]) -> None:
    print(f"{len(results)} rounds, mean ms per answer: mean (min - max) over the rounds")
    lines = {stage: [1000 * stage_means(result)[stage] for result in results] for stage in STAGES}
    lines["end to end"] = [1000 / result["end_to_end"]["per_second"] for result in results]
    for name, values in lines.items():
        spread = f"({min(values):.3f} - {max(values):.3f})"
        rounds = " ".join(f"{v:.3f}" for v in values)
        print(f"  {name:10s} {statistics.mean(values):6.3f}  {spread}   rounds: {rounds}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed run")
    parser.add_argument(
        "--rounds", type=int, default=1, help="child processes in turn; more than one: the spread"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        child(args.seconds)
        return 0
    results = []
    for _round in range(max(args.rounds, 1)):
        with tempfile.TemporaryDirectory(prefix="hyperbook-selectai-bench-") as tmp:
            result = run_child(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", args.seconds)
        if result is None:
            print("Select AI benchmark failed (output above)")
            return 1
        results.append(result)
    report(results[-1])
    if len(results) > 1:
        report_rounds(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
