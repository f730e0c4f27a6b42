"""Where this machine's hyperbook serves: `bin/serve` records its URL in var/serving.json (0600)
and the local tools (`kb_ask`, the console's default KB server) read it, so a token is only sent
to the hyperbook that is actually running, never to a port guessed from the environment.

Run by bin/serve as `python -m core.serving record|banner …`; it imports nothing from Django.
"""

import json
import os
import stat
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

RECORD_NAME = "serving.json"


@dataclass(frozen=True)
class ServingRecord:
    url: str
    pid: int


def local_url(host: str, port: int | str) -> str:
    """The URL a local client uses for a server listening on `host`:`port`."""
    host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal in a URL
    return f"http://{host}:{int(port)}"


def serving_record_write(var_dir: Path, *, url: str, pid: int) -> Path:
    """Record where the server of process `pid` listens; readable and writable by its user only."""
    path = Path(var_dir) / RECORD_NAME
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": pid, "started_at": int(time.time())}, handle)
    os.chmod(partial, 0o600)
    os.replace(partial, path)
    return path


def serving_record_read(var_dir: Path) -> ServingRecord | None:
    """The record of a server that is running now, or None: no record, a record not private to
    this user (it could point anywhere), an unreadable one, or one whose process has ended."""
    path = Path(var_dir) / RECORD_NAME
    try:
        info = path.lstat()
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or stat.S_IMODE(info.st_mode) & 0o077
        ):
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        record = ServingRecord(url=str(data["url"]), pid=int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not record.url.startswith(("http://", "https://")) or not _running(record.pid):
        return None
    return record


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def banner(*, url: str, var_dir: Path, admin_user: str, presets_file: Path) -> str:
    password = (
        "DJANGO_SUPERUSER_PASSWORD"
        if os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        else str(Path(var_dir) / "admin_password")
    )
    return "\n".join(
        [
            "",
            "hyperbook is serving",
            f"  admin:          {url}/admin/",
            f"  login:          {admin_user} (password in {password})",
            f"  token presets:  {presets_file}",
            "  try:            .venv/bin/python manage.py kb_ask --as KB-P-001 "
            '"고객 이름, 전화번호, 주민등록번호 목록"',
            "  stop:           Ctrl-C",
            "",
        ]
    )


def wait_then_print_banner(*, url: str, var_dir: Path, seconds: float = 180) -> bool:
    """Print the banner once /healthz answers (at most `seconds` of waiting)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):  # noqa: S310  (our own URL)
                break
        except urllib.error.HTTPError:
            break  # answering, if not yet healthy (a 503 says which part is not)
        except OSError:
            time.sleep(0.5)
    else:
        return False
    presets = os.environ.get("VPD_TOKEN_PRESETS_FILE") or str(
        Path(var_dir) / "vpd_token_presets.json"
    )
    admin_user = os.environ.get("DJANGO_SUPERUSER_USERNAME", "").strip() or "admin"
    print(
        banner(url=url, var_dir=var_dir, admin_user=admin_user, presets_file=Path(presets)),
        file=sys.stderr,
        flush=True,
    )
    return True


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[1] == "record":
        _, _, var_dir, host, port = argv
        url = local_url(host, port)
        serving_record_write(Path(var_dir), url=url, pid=os.getppid())
        print(url)
        return 0
    if len(argv) == 5 and argv[1] == "banner":
        _, _, var_dir, host, port = argv
        return 0 if wait_then_print_banner(url=local_url(host, port), var_dir=Path(var_dir)) else 1
    print("usage: python -m core.serving record|banner VAR_DIR HOST PORT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
