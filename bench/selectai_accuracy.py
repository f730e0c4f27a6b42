"""Select AI accuracy per question family over the prompt suite (tests/kb/selectai_suite.py).

A second table scores the held-out set (tests/kb/selectai_heldout.py): questions written after the
parser was tuned on the suite and not used to tune it.

    .venv/bin/python bench/selectai_accuracy.py
    .venv/bin/python bench/selectai_accuracy.py --verbose     # also each wrong case and why

Runs in a child process on a throwaway SQLite database (migrated, demo data loaded) with the
built-in parser. A case is correct when its answer equals the truth computed from the CSV files;
policy-exact counts the answers (refusal cases excluded) whose rows and masks follow the policy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import childproc

ROOT = Path(__file__).resolve().parent.parent


def child() -> None:
    import io

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_kb_demo", stdout=io.StringIO())
    from tests.kb.selectai_heldout import CASES as HELDOUT
    from tests.kb.selectai_suite import CASES
    from tests.kb.truth import assert_policy_exact

    results, wrong = [], []
    for case in [*CASES, *HELDOUT]:
        correct, exact = True, None
        try:
            case.run()
        except Exception as exc:  # AssertionError: wrong; anything else: wrong too
            correct = False
            wrong.append(f"{case.id} [{case.stakeholder_id}] {case.prompt}: {exc}"[:400])
        if not case.refusal:
            try:
                assert_policy_exact(case.ask(), case.stakeholder_id)
                exact = True
            except Exception:
                exact = False
        results.append(
            {
                "family": case.family,
                "heldout": case.id.startswith("heldout-"),
                "correct": correct,
                "exact": exact,
            }
        )
    childproc.print_result({"results": results, "wrong": wrong})


def report(result: dict, verbose: bool) -> None:
    suite = [r for r in result["results"] if not r.get("heldout")]
    heldout = [r for r in result["results"] if r.get("heldout")]
    print("prompt suite (the parser was tuned on it)")
    table(suite)
    if heldout:
        print("\nheld-out set (written after tuning, not used to tune)")
        table(heldout)
    checked = [r["exact"] for r in result["results"] if r["exact"] is not None]
    print(f"policy-exact answers (both sets): {sum(checked) / len(checked):.1%} of {len(checked)}")
    for line in result["wrong"] if verbose else []:
        print("  wrong:", line)


def table(results: list[dict]) -> None:
    print(f"{'family':14} {'cases':>5} {'correct':>7} {'accuracy':>8}")
    for family in dict.fromkeys(r["family"] for r in results):
        rows = [r for r in results if r["family"] == family]
        correct = sum(r["correct"] for r in rows)
        print(f"{family:14} {len(rows):5} {correct:7} {correct / len(rows):8.1%}")
    correct = sum(r["correct"] for r in results)
    print(f"{'all':14} {len(results):5} {correct:7} {correct / len(results):8.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list the wrong cases")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        child()
        return 0
    with tempfile.TemporaryDirectory(prefix="hyperbook-selectai-accuracy-") as tmp:
        result = childproc.run_child(
            __file__,
            database_url=f"sqlite:///{Path(tmp) / 'accuracy.sqlite3'}",
            seconds=0,
            env={"KB_QUERY_BACKEND": "embedded", "SELECT_AI_PROVIDER": "builtin"},
        )
    if result is None:
        print("Select AI accuracy run failed (output above)")
        return 1
    report(result, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
