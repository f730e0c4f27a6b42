"""Select AI prompts per second (parse -> plan -> answer) on SQLite, and where the time goes.

    .venv/bin/python bench/selectai_bench.py                # ~3 s per measurement
    .venv/bin/python bench/selectai_bench.py --seconds 10

The database is a throwaway SQLite file in a temp dir, migrated and loaded with `load_kb_demo`, run
in a child process with DJANGO_SETTINGS_MODULE=hyperbook.settings.test and the built-in parser.
Reported: the cold start (warm_up: Kiwi's model and the vocabulary), end-to-end answer_question
throughput over a mix of question families and stakeholders, and the split of each answer's time
between parsing (prompt -> plan), executing (plan -> VPD-filtered answer) and the rest (stakeholder
lookup, policy check). Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import childproc

ROOT = Path(__file__).resolve().parent.parent

# (stakeholder, prompt): every parser family, all three roles, rows and aggregates.
PROMPTS = [
    ("KB-P-001", "담당 고객의 보험료 상세를 보여줘"),
    ("KB-P-001", "이번 달 미납 보험료"),
    ("KB-M-001", "이번 달 미납 보험료"),
    ("KB-P-001", "전체 고객"),
    ("KB-M-002", "고객 전화번호 목록"),
    ("KB-P-001", "고객 C0001 상세 정보"),
    ("KB-H-001", "고객 C0001 상세 정보"),
    ("KB-P-001", "VIP 고객의 유지 계약"),
    ("KB-H-001", "다음 달 만기 예정 계약"),
    ("KB-P-002", "최근 3개월 자동차보험 납입 내역"),
    ("KB-H-001", "지점별 보험료 합계"),
    ("KB-M-002", "설계사별 월보험료 합계"),
    ("KB-H-001", "상품별 계약 건수"),
    ("KB-P-003", "보험료 상위 5명 고객"),
    ("KB-H-001", "이번 달 미납 고객 수"),
    ("KB-H-001", "연령대별 고객 수"),
    ("KB-P-001", "30대 여성 고객"),
    ("KB-M-003", "작년 12월 납입 내역"),
    ("KB-P-001", "show unpaid premiums this month"),
    ("KB-P-001", "오늘 서울 날씨 어때?"),
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

    for stakeholder_id, prompt in PROMPTS:  # warm caches (query compilation, lexicon, ...)
        answer_question(stakeholder_id=stakeholder_id, prompt=prompt, limit=LIMIT)

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
    answering.execute_plan = timed("execute", answering.execute_plan)
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
    rows = result["per_prompt"]
    totals = {stage: sum(f[stage] for f in rows.values()) for stage in STAGES}
    total = sum(totals.values())
    n = sum(f["n"] for f in rows.values())
    shares = "  ".join(f"{stage} {totals[stage] / total:5.1%}" for stage in STAGES)
    means = " + ".join(f"{1000 * totals[stage] / n:.2f}" for stage in STAGES)
    print(f"  share of time ({n} answers)   {shares}  (mean ms {means})")
    print("  per question, mean ms:  parse  execute  other")
    for name, f in rows.items():
        if f["n"]:
            print(
                f"    {1000 * f['parse'] / f['n']:18.2f} {1000 * f['execute'] / f['n']:8.2f}"
                f" {1000 * f['other'] / f['n']:6.2f}  {name}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        child(args.seconds)
        return 0
    with tempfile.TemporaryDirectory(prefix="hyperbook-selectai-bench-") as tmp:
        result = run_child(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", args.seconds)
    if result is None:
        print("Select AI benchmark failed (output above)")
        return 1
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
