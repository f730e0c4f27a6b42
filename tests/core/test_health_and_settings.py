import os
import stat
import subprocess
import sys

import pytest

pytestmark = pytest.mark.django_db


def test_healthz_reports_database_and_broker_without_details(client):
    response = client.get("/healthz")
    payload = response.json()
    assert response.status_code == 200
    assert payload == {"status": "ok", "checks": {"database": True, "broker": True}}


def test_healthz_says_unavailable_when_the_broker_cannot_be_reached(client, settings):
    from hyperbook.celery import app

    app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": True, "broker": False}
    assert "127.0.0.1:1" not in response.content.decode()


def run_settings(module: str, env: dict) -> subprocess.CompletedProcess:
    code = (
        "import django; django.setup(); from django.conf import settings;"
        "print(len(settings.SECRET_KEY))"
    )
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "TOKEN_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean_env, "DJANGO_SETTINGS_MODULE": module, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_settings_fail_loudly_without_secrets(tmp_path):
    result = run_settings("hyperbook.settings.production", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr
    assert not any(tmp_path.iterdir())


def test_production_settings_read_secrets_from_files(tmp_path):
    (tmp_path / "sk").write_text("s" * 50)
    (tmp_path / "fk").write_text("f" * 50)
    result = run_settings(
        "hyperbook.settings.production",
        {
            "DJANGO_SECRET_KEY_FILE": str(tmp_path / "sk"),
            "TOKEN_FINGERPRINT_KEY_FILE": str(tmp_path / "fk"),
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "50"


def test_local_settings_generate_owner_only_secrets_once(tmp_path):
    first = run_settings("hyperbook.settings.local", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    second = run_settings("hyperbook.settings.local", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    secret_file = tmp_path / "django_secret_key"
    key_file = tmp_path / "token_fingerprint_key"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert secret_file.read_text() != key_file.read_text()
