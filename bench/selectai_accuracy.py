"""Select AI accuracy per question family: what each question of the four sets comes to.

The sets: the prompt suite (tests/kb/selectai_suite.py), the held-out set
(tests/kb/selectai_heldout.py), the second and third held-out sets
(tests/kb/selectai_heldout2.py, tests/kb/selectai_heldout3.py). Each question is right (the
truth, or the refusal it expects), refused naming what could not be used, wrong but flagged (its
answer lists words it left out), or wrong and silent. "by proof" counts the refusals the second
reading made (kb.proof: the two readings disagreed).

RS(c) scores as EHRSQL 2024 does text-to-SQL with abstention: +1 for a right answer or a right
refusal, 0 for refusing an answerable question, -c for a wrong answer (flagged or silent), over
the number of questions. RS(0) rewards only being right; RS(10) is what a confident wrong
answer costs an agent that relays it.

    .venv/bin/python bench/selectai_accuracy.py
    .venv/bin/python bench/selectai_accuracy.py --verbose     # also each wrong case and why

Runs in a child process on a throwaway SQLite database (migrated, demo data loaded) with the
built-in reader. A case is right when its answer equals the truth computed from the CSV files;
policy-exact counts the answers and refusals that keep to the asker's rows and masks.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import childproc

ROOT = Path(__file__).resolve().parent.parent


SUITES = (
    ("suite", "prompt suite (the reader was tuned on it)"),
    ("heldout", "held-out set (written after tuning, not used to tune)"),
    ("heldout2", "second held-out set (written before the staged reader, by others)"),
    ("heldout3", "third held-out set (written before the second reading, by others)"),
)


def child() -> None:
    import io

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("load_kb_demo", stdout=io.StringIO())
    from tests.kb.selectai_heldout import CASES as HELDOUT
    from tests.kb.selectai_heldout2 import CASES as HELDOUT2
    from tests.kb.selectai_heldout3 import CASES as HELDOUT3
    from tests.kb.selectai_suite import CASES, RIGHT, refusals
    from tests.kb.truth import assert_policy_exact, assert_refusal_policy_exact

    results, wrong = [], []
    sets = (("suite", CASES), ("heldout", HELDOUT), ("heldout2", HELDOUT2), ("heldout3", HELDOUT3))
    for suite, cases in sets:
        for case in cases:
            try:
                outcome, got = case.outcome()
            except Exception as exc:  # a crash is a wrong answer that says nothing
                outcome, got = "silent", exc
            if outcome != RIGHT:
                wrong.append(f"{outcome:8} {case.id} [{case.stakeholder_id}] {case.prompt}: "
                             f"{_said(got)}"[:500])  # fmt: skip
            try:
                if isinstance(got, refusals()):
                    assert_refusal_policy_exact(got.message, case.stakeholder_id)
                elif isinstance(got, dict):
                    assert_policy_exact(got, case.stakeholder_id)
                exact = True
            except AssertionError:
                exact = False
            by_proof = getattr(got, "reason", None) == "proof_disagrees"
            results.append(
                {"suite": suite, "family": case.family, "outcome": outcome, "exact": exact,
                 "by_proof": by_proof}
            )  # fmt: skip
    childproc.print_result({"results": results, "wrong": wrong, "generated": generated()})


GENERATED_SEED, GENERATED_CASES = 1, 2000


def generated() -> list[dict]:
    """Each generated question's classes (kind and form, in the question's language) and what
    it came to (tests/kb/selectai_generator.py): right, refused or wrong."""
    from tests.kb.selectai_generator import generate, outcome

    out = []
    for case in generate(GENERATED_SEED, GENERATED_CASES):
        result, _ = outcome(case)
        classes, shape, language = case.case_class.split("|")
        for part in classes.split(","):
            kind, _, detail = part.partition(":")
            if kind == "amount":  # the form written in the question's language, and its bound
                forms, _, op = detail.partition(":")
                ko, _, en = forms.partition("/")
                detail = f"{en if language == 'en' else ko}:{op}"
            out.append({"family": f"{kind} {detail}".strip() + f" ({language})",
                        "kind": kind, "shape": shape, "outcome": result})  # fmt: skip
    return out


def _said(got) -> str:
    if isinstance(got, Exception):
        return f"{type(got).__name__}: {getattr(got, 'message', got)}"
    interpretation = got.get("interpretation", {})
    return (
        f"plan={interpretation.get('plan')} ignored={interpretation.get('ignored')}"
        f" rows={got.get('row_count')}"
    )


def report(result: dict, verbose: bool, markdown: bool) -> None:
    for suite, title in SUITES:
        rows = [r for r in result["results"] if r["suite"] == suite]
        if rows:
            print(f"\n{title}")
            table(rows, markdown)
    checked = [r["exact"] for r in result["results"]]
    print(f"\npolicy-exact answers and refusals (all sets): {sum(checked) / len(checked):.1%}"
          f" of {len(checked)}")  # fmt: skip
    for line in result["wrong"] if verbose else []:
        print("  ", line)
    generated_report(result["generated"], markdown)


def generated_report(rows: list[dict], markdown: bool) -> None:
    """Generated questions per class (a question of two classes counts in both, and twice in
    "all"): right, refused, wrong (never allowed)."""
    print(f"\ngenerated questions ({GENERATED_CASES}, seed {GENERATED_SEED}), per class")
    header = ("class", "cases", "right", "refused", "wrong", "right %")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(f"{header[0]:34}" + "".join(f"{h:>9}" for h in header[1:]))
    for family in [*sorted({r["family"] for r in rows}), "all"]:
        picked = [r for r in rows if family in ("all", r["family"])]
        counts = [sum(r["outcome"] == o for r in picked) for o in ("right", "refused", "wrong")]
        cells = [family, len(picked), *counts, f"{counts[0] / len(picked):.1%}"]
        if markdown:
            print("| " + " | ".join(str(c) for c in cells) + " |")
        else:
            print(f"{cells[0]:34}" + "".join(f"{c:>9}" for c in cells[1:]))


OUTCOMES = ("right", "refused", "flagged", "silent")


def rs(results: list[dict], penalty: float) -> float:
    """EHRSQL's reliability score: +1 right, 0 refused, -penalty wrong, over every question."""
    score = sum(
        1 if r["outcome"] == "right" else -penalty if r["outcome"] in ("flagged", "silent") else 0
        for r in results
    )
    return score / len(results)


def table(results: list[dict], markdown: bool) -> None:
    """Per family: right; refused naming the words (by the second reading); wrong but flagged;
    wrong and silent; RS(0) and RS(10)."""
    header = ("family", "cases", "right", "refused", "by proof", "flagged", "silent", "right %",
              "RS(0)", "RS(10)")  # fmt: skip
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(f"{header[0]:18}" + "".join(f"{h:>9}" for h in header[1:]))
    families = list(dict.fromkeys(r["family"] for r in results)) + ["all"]
    for family in families:
        rows = [r for r in results if family in ("all", r["family"])]
        right, refused, flagged, silent = (sum(r["outcome"] == o for r in rows) for o in OUTCOMES)
        by_proof = sum(r.get("by_proof", False) for r in rows)
        scores = [f"{right / len(rows):.1%}", f"{rs(rows, 0):.1%}", f"{rs(rows, 10):.1%}"]
        cells = [family, len(rows), right, refused, by_proof, flagged, silent, *scores]
        if markdown:
            print("| " + " | ".join(str(c) for c in cells) + " |")
        else:
            print(f"{cells[0]:18}" + "".join(f"{c:>9}" for c in cells[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list the cases not right")
    parser.add_argument("--markdown", action="store_true", help="tables as Markdown")
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
    report(result, args.verbose, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
