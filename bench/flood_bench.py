"""A flood of bad tokens against /mcp: what it adds to the audit log, and what it does to a valid
agent's latency.

One hyperbook server (uvicorn, one worker, a throwaway SQLite database, the default budgets:
MCP_AUTH_FAILURE_LIMIT 20/minute, AUDIT_REFUSALS_PER_ADDRESS 20 per 60 s window). A valid agent
calls `tools/call` one request at a time, first alone for `--idle` seconds, then while `--clients`
(8) connections send bad tokens as fast as they can for `--seconds` (60). Reports the flood's
requests, the audit events it added and their bytes, extrapolated to an hour (target: at most
5 MB an hour), and the agent's p99 during the flood against its idle p99 (target: under 3×).
Loopback only; bounded by the two phases.

    .venv/bin/python bench/flood_bench.py
    .venv/bin/python bench/flood_bench.py --quick        # 15 s of flood
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "ords.query.kb_select_ai_vpd",
        "arguments": {"prompt": "담당 고객 목록", "limit": 10},
    },
}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


async def agent(url: str, token: str, seconds: float) -> list[float]:
    latencies = []
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30) as client:
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            started = time.perf_counter()
            response = await client.post(url, json=CALL, headers=headers)
            if response.status_code == 200:
                latencies.append(time.perf_counter() - started)
    return latencies


async def flood(url: str, clients: int, seconds: float) -> dict[int, int]:
    statuses: dict[int, int] = {}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()

    async def one(client: httpx.AsyncClient):
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            headers = {**HEADERS, "Authorization": f"Bearer hbvpd_{secrets.token_urlsafe(32)}"}
            try:
                response = await client.post(url, content=body, headers=headers)
            except httpx.HTTPError:
                statuses[0] = statuses.get(0, 0) + 1
                continue
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(clients)))
    return statuses


def run_flood(url: str, clients: int, seconds: float) -> dict[int, int]:
    return asyncio.run(flood(url, clients, seconds))


def audit_rows(db: Path, after_sequence: int) -> tuple[int, int, int]:
    """(flood events, all events, bytes of the flood's events) appended after `after_sequence`."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT action, outcome, client_address, user_agent, detail, changes, request_id,"
            " hash, prev_hash, token_prefix, origin FROM audit_auditevent WHERE sequence > ?",
            [after_sequence],
        ).fetchall()
    flood_rows = [
        r for r in rows if r[1] in ("unauthenticated", "rate_limited", "summary") and not r[9]
    ]
    # Bytes as stored: every text column plus a fixed 120 for numbers, ids and row overhead.
    size = sum(sum(len(str(v or "").encode()) for v in r) + 120 for r in flood_rows)
    return len(flood_rows), len(rows), size


def last_sequence(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COALESCE(MAX(sequence), 0) FROM audit_auditevent").fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--idle", type=float, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="--seconds 15 --idle 5")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.idle = 15, 5
    with tempfile.TemporaryDirectory(prefix="hyperbook-flood-") as folder:
        db = Path(folder) / "flood.sqlite3"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
            "DATABASE_URL": f"sqlite:///{db}",
            "HYPERBOOK_VAR_DIR": f"{folder}/var",
            "REDIS_URL": "",
            "EGS2_MEMORY_API_URL": "",
            "MCP_RATE_LIMIT": "1000000/minute",  # the agent is never throttled itself
            "FORWARDED_ALLOW_IPS": "",
            "LOG_LEVEL": "WARNING",
        }
        manage = [sys.executable, "manage.py"]
        for step in (["migrate", "--noinput", "-v0"], ["load_kb_demo"]):
            subprocess.run(manage + step, cwd=ROOT, env=env, check=True, capture_output=True)
        presets = Path(folder) / "presets.json"
        subprocess.run(
            manage + ["issue_demo_delegations", "--output", str(presets)],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        token = json.loads(presets.read_text())["KB-P-001"]
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "hyperbook.asgi:application", "--port", str(port),
             "--no-access-log"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            asyncio.run(agent(url, token, 2))  # warm up
            idle = asyncio.run(agent(url, token, args.idle))
            before = last_sequence(db)

            # The flood runs in a process of its own, so that the agent's timings measure the
            # server, not a client loop shared with the flood.
            with multiprocessing.get_context("fork").Pool(1) as pool:
                flooding = pool.apply_async(run_flood, (url, args.clients, args.seconds))
                time.sleep(1)
                during = asyncio.run(agent(url, token, args.seconds - 2))
                statuses = flooding.get(timeout=args.seconds + 60)
            time.sleep(2)
            # The window's summary is written when the window ends; end it now, as shutdown does.
            server.terminate()
            server.wait(timeout=60)
            flood_events, all_events, flood_bytes = audit_rows(db, before)
        finally:
            if server.poll() is None:
                server.kill()
    requests = sum(statuses.values())
    per_hour = flood_bytes * 3600 / args.seconds
    idle_p99, flood_p99 = percentile(idle, 0.99), percentile(during, 0.99)
    ratio = flood_p99 / idle_p99 if idle_p99 else float("inf")
    print(f"flood: {args.clients} clients, bad tokens, {args.seconds:.0f}s: {requests:,} requests")
    print(f"  by status: {dict(sorted(statuses.items()))}")
    print(
        f"audit: {flood_events} events for the flood ({all_events} in all, the agent's included), "
        f"{flood_bytes / 1024:.1f} KiB = {per_hour / 1e6:.2f} MB an hour of flood (target 5 MB)"
    )
    print(
        f"valid agent tools/call p99: idle {idle_p99 * 1000:.1f} ms, during the flood "
        f"{flood_p99 * 1000:.1f} ms ({ratio:.2f}x; target under 3x); "
        f"{len(during)} calls during the flood"
    )
    ok = per_hour <= 5e6 and ratio < 3
    print("flood bench: " + ("targets met" if ok else "TARGETS MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
