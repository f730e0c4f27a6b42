"""Plans per second of the KB data layer (kb.vpd.execute_plan), on SQLite and PostgreSQL.

    .venv/bin/python bench/kb_plans.py                 # ~2 s per plan and database
    .venv/bin/python bench/kb_plans.py --seconds 5
    .venv/bin/python bench/kb_plans.py --no-postgres

Each database is a throwaway: a SQLite file in a temp dir, and (when PostgreSQL answers at
KB_BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres) a database created for
the run and dropped after it. Both are migrated and loaded with `load_kb_demo`. Every database runs
in its own process (settings are per process). Not a test: numbers depend on the machine and load.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import childproc

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("KB_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")

PLANS = {
    "row: planner, contracts (default columns, 20 rows)": (
        "KB-P-001",
        {"entity": "contracts", "limit": 20},
    ),
    "row: hq, unpaid payments 2026-Q2 (50 rows, masked names)": (
        "KB-H-001",
        {
            "entity": "premium_payments",
            "filters": [
                {"field": "status", "op": "eq", "value": "미납"},
                {"field": "due_month", "op": "between", "value": ["2026-04", "2026-06"]},
            ],
            "order_by": [{"field": "amount", "direction": "desc"}],
            "limit": 50,
        },
    ),
    "aggregate: branch manager, unpaid by month (count, sum)": (
        "KB-M-001",
        {
            "entity": "premium_payments",
            "filters": [{"field": "status", "op": "eq", "value": "미납"}],
            "group_by": ["due_month"],
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "sum", "field": "amount", "as": "total_amount"},
            ],
        },
    ),
    "aggregate: hq, customers by age group (count, avg age)": (
        "KB-H-001",
        {
            "entity": "customers",
            "group_by": ["age_group"],
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "avg", "field": "age", "as": "avg_age"},
            ],
        },
    ),
}


def child(seconds: float) -> None:
    """Runs inside the per-database process: migrate, load, then time each plan."""
    import io

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from kb.selectors import stakeholder_get
    from kb.vpd import execute_plan

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    call_command("load_kb_demo", stdout=io.StringIO())
    load_seconds = time.perf_counter() - started

    results = {"vendor": connection.vendor, "load_seconds": load_seconds, "plans": {}}
    for name, (stakeholder_id, plan) in PLANS.items():
        stakeholder = stakeholder_get(stakeholder_id)
        for _ in range(20):  # warm-up: connection, query compilation caches
            execute_plan(plan, stakeholder=stakeholder)
        count, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            execute_plan(plan, stakeholder=stakeholder)
            count += 1
        rows = execute_plan(plan, stakeholder=stakeholder)["row_count"]
        results["plans"][name] = {"per_second": count / elapsed, "rows": rows}
    childproc.print_result(results)


def run_child(database_url: str, seconds: float) -> dict | None:
    return childproc.run_child(__file__, database_url=database_url, seconds=seconds)


def postgres_admin():
    try:
        import psycopg

        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        print(f"PostgreSQL not reachable at {ADMIN_URL} ({type(exc).__name__}); skipped")
        return None


def report(label: str, result: dict | None) -> None:
    if result is None:
        print(f"{label}: failed (output above)")
        return
    print(f"{label} (demo load {result['load_seconds'] * 1000:.0f} ms)")
    for name, figures in result["plans"].items():
        per_second = figures["per_second"]
        print(
            f"  {per_second:8.0f} plans/s  {1000 / per_second:6.2f} ms/plan"
            f"  {figures['rows']:3d} rows  {name}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed run per plan")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        child(args.seconds)
        return 0

    failed = False
    with tempfile.TemporaryDirectory(prefix="hyperbook-kb-bench-") as tmp:
        result = run_child(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", args.seconds)
        report("SQLite", result)
        failed |= result is None

    admin = None if args.no_postgres else postgres_admin()
    if admin is not None:
        name = f"hyperbook_kb_bench_{uuid.uuid4().hex[:8]}"
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            base = ADMIN_URL.rsplit("/", 1)[0]
            result = run_child(f"{base}/{name}", args.seconds)
            report("PostgreSQL (reads as the RLS reader role)", result)
            failed |= result is None
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
