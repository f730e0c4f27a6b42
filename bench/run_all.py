"""Run the benchmarks in bench/ one after another (`make bench`).

    .venv/bin/python bench/run_all.py                 # every benchmark found, default options
    .venv/bin/python bench/run_all.py --quick         # shorter runs (mcp_bench --duration 5)
    .venv/bin/python bench/run_all.py --only mcp_bench

Known benchmarks run first, in this order, when their file exists: mcp_bench.py (our /mcp vs the
bare SDK), kb_plans.py (KB query plans), then a Select AI benchmark (selectai_bench.py,
bench_selectai.py or selectai.py). Any other bench/*.py with a `main` guard is run after them;
helpers (names starting with "_") and this file are skipped. Each benchmark runs in its own
process with a time limit; the exit code is non-zero when any of them failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
KNOWN = [
    ("mcp_bench.py",),
    ("kb_plans.py",),
    ("selectai_bench.py", "bench_selectai.py", "selectai.py"),
]
QUICK_ARGS = {
    "mcp_bench.py": ["--duration", "5"],
    "kb_plans.py": ["--seconds", "1"],
    "selectai_bench.py": ["--seconds", "1"],
    "broker_bench.py": ["--quick"],
    "delivery_bench.py": ["--quick"],
    "flood_bench.py": ["--quick"],
    "soak.py": ["--duration", "60"],
}
# Always: the /mcp figures include what the audit event costs (ours with and without it).
ALWAYS_ARGS = {"mcp_bench.py": ["--with-no-audit"]}
TIMEOUT_SECONDS = 20 * 60


def discover() -> list[Path]:
    found: list[Path] = []
    for alternatives in KNOWN:
        for name in alternatives:
            path = BENCH_DIR / name
            if path.is_file():
                found.append(path)
                break
    for path in sorted(BENCH_DIR.glob("*.py")):
        if path in found or path.name == Path(__file__).name or path.name.startswith("_"):
            continue
        if "__main__" in path.read_text(encoding="utf-8", errors="replace"):
            found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the benchmarks in bench/ in sequence.")
    parser.add_argument("--quick", action="store_true", help="shorter runs where supported")
    parser.add_argument("--only", action="append", default=[], help="run only this (file stem)")
    parser.add_argument("--list", action="store_true", help="list what would run, then stop")
    args = parser.parse_args(argv)

    benches = discover()
    if args.only:
        benches = [p for p in benches if p.stem in args.only or p.name in args.only]
    if args.list or not benches:
        for path in benches:
            print(path.relative_to(ROOT))
        if not benches:
            print("no benchmarks found in bench/", file=sys.stderr)
        return 0 if benches or args.list else 1

    outcomes: list[tuple[str, str, float]] = []
    for path in benches:
        extra = ALWAYS_ARGS.get(path.name, []) + (
            QUICK_ARGS.get(path.name, []) if args.quick else []
        )
        command = [sys.executable, str(path), *extra]
        print(f"\n=== {path.relative_to(ROOT)} ({' '.join(extra) or 'defaults'}) ===", flush=True)
        started = time.monotonic()
        try:
            completed = subprocess.run(
                command,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                timeout=TIMEOUT_SECONDS,
            )
            status = "ok" if completed.returncode == 0 else f"failed (exit {completed.returncode})"
        except subprocess.TimeoutExpired:
            status = f"timed out after {TIMEOUT_SECONDS} s"
        except KeyboardInterrupt:
            outcomes.append((path.name, "interrupted", time.monotonic() - started))
            break
        outcomes.append((path.name, status, time.monotonic() - started))

    print("\n=== summary ===")
    for name, status, seconds in outcomes:
        print(f"{name:<24} {status:<28} {seconds:6.0f} s")
    return 0 if all(status == "ok" for _, status, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
