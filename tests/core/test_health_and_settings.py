import os
import stat
import subprocess
import sys
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from audit.signed_note import Signer
from hyperbook.settings.env import env_bool
from kb.assertions import key_from_file, signing_key_file_generated

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_part_and_no_details(client):
    from audit.delivery import sink_heartbeat

    sink_heartbeat()  # a worker has just run the delivery sweep
    response = client.get("/healthz")
    payload = response.json()
    assert response.status_code == 200
    assert payload["status"] == "ok"
    assert payload["checks"] == {"database": True, "broker": True}
    assert payload["worker"]["alive"] is True
    assert payload["audit_backlog"] == {"pending": 0, "oldest_seconds": None}
    assert payload["delivery"]["enabled"] is False
    assert "sqlite" not in response.content.decode()


def test_without_a_worker_heartbeat_it_is_degraded_not_down(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "degraded"
    assert response.json()["degraded"] == ["worker"]


def test_an_unreachable_broker_only_degrades_it(client, settings):
    from audit.delivery import sink_heartbeat
    from hyperbook.celery import app

    sink_heartbeat()
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    app.conf.broker_transport = None
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = settings.CELERY_BROKER_URL
        app.conf.broker_transport = settings.CELERY_BROKER_TRANSPORT
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": True, "broker": False}
    assert response.json()["degraded"] == ["broker"]
    assert "127.0.0.1:1" not in response.content.decode()


def test_an_old_backlog_with_delivery_on_degrades_it(client, settings):
    from audit.delivery import sink_heartbeat
    from audit.services import audit_events_append

    settings.EGS2_MEMORY_API_URL = "http://127.0.0.1:9"
    sink_heartbeat()
    audit_events_append(events=[{"action": "mcp.tools_list", "outcome": "allowed"}] * 3)
    assert client.get("/healthz").json()["audit_backlog"]["pending"] == 3
    assert client.get("/healthz").json()["status"] == "ok"  # young: not behind yet
    settings.AUDIT_BACKLOG_DEGRADED_SECONDS = 1
    time.sleep(1.2)
    payload = client.get("/healthz").json()
    assert payload["degraded"] == ["audit_backlog"]
    assert payload["audit_backlog"]["oldest_seconds"] > 1


def run_settings(module: str, env: dict) -> subprocess.CompletedProcess:
    code = (
        "import django; django.setup(); from django.conf import settings;"
        "print(len(settings.SECRET_KEY))"
    )
    clean_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "TOKEN_", "AUDIT_", "KB_ASSERTION_"))
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean_env, "DJANGO_SETTINGS_MODULE": module, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow  # a fresh process per settings module
def test_production_settings_fail_loudly_without_secrets(tmp_path):
    result = run_settings("hyperbook.settings.production", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # a fresh process per settings module
def test_production_settings_read_secrets_from_files(tmp_path):
    (tmp_path / "sk").write_text("s" * 50)
    (tmp_path / "fk").write_text("f" * 50)
    (tmp_path / "ak").write_text(Signer.generate("kb.example.com/audit").text())
    signing_key_file_generated(tmp_path / "kb-assertion.pem")
    env = {
        "DJANGO_SECRET_KEY_FILE": str(tmp_path / "sk"),
        "TOKEN_FINGERPRINT_KEY_FILE": str(tmp_path / "fk"),
        "AUDIT_SIGNING_KEY_FILE": str(tmp_path / "ak"),
        "AUDIT_ORIGIN": "kb.example.com/audit",
        "KB_ASSERTION_SIGNING_KEY_FILE": str(tmp_path / "kb-assertion.pem"),
    }
    result = run_settings("hyperbook.settings.production", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "50"
    # The checkpoint signer key, the log's name and the ORDS assertions' key are required too.
    for missing in ("AUDIT_SIGNING_KEY_FILE", "AUDIT_ORIGIN", "KB_ASSERTION_SIGNING_KEY_FILE"):
        result = run_settings(
            "hyperbook.settings.production", {k: v for k, v in env.items() if k != missing}
        )
        assert result.returncode != 0
        assert missing.removesuffix("_FILE") in result.stderr


@pytest.mark.slow  # a fresh process per settings module
def test_local_settings_generate_owner_only_secrets_once(tmp_path):
    first = run_settings("hyperbook.settings.local", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    second = run_settings("hyperbook.settings.local", {"HYPERBOOK_VAR_DIR": str(tmp_path)})
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    secret_file = tmp_path / "django_secret_key"
    key_file = tmp_path / "token_fingerprint_key"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert secret_file.read_text() != key_file.read_text()
    signer_file = tmp_path / "audit_signing_key"
    assert stat.S_IMODE(signer_file.stat().st_mode) == 0o600
    assert Signer.from_text(signer_file.read_text()).name == "hyperbook.local/audit"
    assertion_key = tmp_path / "kb_assertion_rsa_key.pem"
    assert stat.S_IMODE(assertion_key.stat().st_mode) == 0o600
    assert key_from_file(str(assertion_key), setting="x").algorithm == "RS256"  # what ORDS takes


@pytest.mark.parametrize(
    ("raw", "value"), [("1", True), (" Yes ", True), ("off", False), ("", None)]
)
def test_a_boolean_setting_reads_the_usual_spellings(monkeypatch, raw, value):
    monkeypatch.setenv("HB_TEST_FLAG", raw)
    assert env_bool("HB_TEST_FLAG", default=None) is value


def test_a_boolean_setting_with_a_typo_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("SECURE_SSL_REDIRECT", "ture")
    with pytest.raises(ImproperlyConfigured, match="SECURE_SSL_REDIRECT must be one of"):
        env_bool("SECURE_SSL_REDIRECT")
