"""bin/serve's record of where it serves (var/serving.json): private, trusted only while its
process runs, read by the demo's settings; and the banner that ends `make run`."""

import os
import stat
import subprocess
import sys

import pytest

from core.serving import banner, local_url, serving_record_read, serving_record_write
from tests.live import ROOT


def test_the_record_is_owner_only_and_names_the_url(tmp_path):
    path = serving_record_write(tmp_path, url="http://127.0.0.1:8123", pid=os.getpid())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record = serving_record_read(tmp_path)
    assert record is not None and record.url == "http://127.0.0.1:8123"


def test_a_record_others_can_read_or_write_is_not_trusted(tmp_path):
    path = serving_record_write(tmp_path, url="http://127.0.0.1:8123", pid=os.getpid())
    path.chmod(0o644)
    assert serving_record_read(tmp_path) is None


def test_a_record_of_a_stopped_server_is_not_trusted(tmp_path):
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    serving_record_write(tmp_path, url="http://127.0.0.1:8123", pid=int(ended.stdout))
    assert serving_record_read(tmp_path) is None


@pytest.mark.parametrize("text", ["", "{", '{"url": "file:///etc/passwd", "pid": 1}', "[]"])
def test_a_broken_record_is_not_trusted(tmp_path, text):
    path = tmp_path / "serving.json"
    path.write_text(text)
    path.chmod(0o600)
    assert serving_record_read(tmp_path) is None


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0", "http://127.0.0.1:8001"),  # noqa: S104  (what HOST may say)
        ("::1", "http://[::1]:8001"),
        ("", "http://127.0.0.1:8001"),
    ],
)
def test_the_local_url_is_one_a_client_can_reach(host, url):
    assert local_url(host, "8001") == url


def test_bin_serve_records_its_own_pid_as_the_one_it_execs_into(tmp_path):
    # The shell's pid becomes supervisord's after `exec`: record, then exec, as bin/serve does.
    script = (
        f'"{sys.executable}" -m core.serving record "{tmp_path}" 0.0.0.0 8765 >/dev/null; '
        "exec sleep 30"
    )
    shell = subprocess.Popen(["bash", "-c", script], cwd=ROOT)
    try:
        for _ in range(100):
            record = serving_record_read(tmp_path)
            if record:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert record is not None and record.pid == shell.pid
        assert record.url == "http://127.0.0.1:8765"
    finally:
        shell.kill()
        shell.wait(timeout=10)
    assert serving_record_read(tmp_path) is None


def demo_setting(var_dir, name, **env):
    environ = {k: v for k, v in os.environ.items() if k not in ("PORT", "HOST", "KB_MCP_BASE_URL")}
    environ.update(
        DJANGO_SETTINGS_MODULE="hyperbook.settings.local", HYPERBOOK_VAR_DIR=str(var_dir), **env
    )
    code = (
        f"import django; django.setup(); from django.conf import settings; print(settings.{name})"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.slow
def test_the_demo_knows_no_kb_server_without_a_record_or_a_base_url(tmp_path):
    assert demo_setting(tmp_path, "KB_MCP_BASE_URL") == ""
    serving_record_write(tmp_path, url="http://127.0.0.1:8123", pid=os.getpid())
    assert demo_setting(tmp_path, "KB_MCP_BASE_URL") == "http://127.0.0.1:8123"
    explicit = demo_setting(tmp_path, "KB_MCP_BASE_URL", KB_MCP_BASE_URL="http://127.0.0.1:9001")
    assert explicit == "http://127.0.0.1:9001"


def test_the_banner_names_the_admin_login_presets_and_a_first_question(tmp_path, monkeypatch):
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    # Canaries: the presets' tokens and the admin's password are files the banner names, never
    # what they hold.
    (tmp_path / "vpd_token_presets.json").write_text(
        '{"KB-P-001": "hbvpd_BannerCanary0123456789abcdef"}'
    )
    (tmp_path / "admin_password").write_text("banner-canary-password\n")
    text = banner(
        url="http://127.0.0.1:8123",
        var_dir=tmp_path,
        admin_user="admin",
        presets_file=tmp_path / "vpd_token_presets.json",
    )
    assert "http://127.0.0.1:8123/admin/" in text
    assert f"admin (password in {tmp_path / 'admin_password'})" in text
    assert str(tmp_path / "vpd_token_presets.json") in text
    assert "manage.py kb_ask --as KB-P-001" in text
    assert "BannerCanary" not in text and "banner-canary-password" not in text
