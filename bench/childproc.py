"""A benchmark's measuring half runs in a child process with its own settings and database, and
prints one result line that the parent reads back."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "BENCH_RESULT "


def print_result(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result, ensure_ascii=False))


def run_child(script: str, *, database_url: str, seconds: float, env: dict | None = None):
    """Run `script --child --seconds N` on `database_url`; its result, or None (output shown)."""
    child_env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="hyperbook.settings.test",
        DATABASE_URL=database_url,
        LOG_LEVEL="WARNING",
        **(env or {}),
    )
    done = subprocess.run(
        [sys.executable, script, "--child", "--seconds", str(seconds)],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
    return None
