"""A host with no collected static files would answer 500 on every admin, login and consent page
(the manifest storage finds no manifest): `check --deploy` says so, and bin/serve collects them as
it starts, or refuses to start, saying what to do, when it cannot and none were collected before."""

import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.live import ROOT

MANIFEST_STORAGE = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


@pytest.fixture
def production_static(settings, tmp_path):
    settings.DEBUG = False
    settings.STORAGES = MANIFEST_STORAGE
    settings.STATIC_ROOT = str(tmp_path / "static")
    return Path(settings.STATIC_ROOT)


def test_check_deploy_fails_clearly_on_a_host_with_nothing_collected(production_static):
    with pytest.raises(SystemCheckError) as failed:
        call_command("check", "--deploy", "--tag", "staticfiles")
    message = str(failed.value)
    assert "hyperbook.E001" in message
    assert "collectstatic" in message and str(production_static) in message

    production_static.mkdir()
    (production_static / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    call_command("check", "--deploy", "--tag", "staticfiles")  # collected: no error


def test_the_check_does_not_stand_in_the_way_of_collecting(production_static):
    # collectstatic runs the (non-deploy) static checks first: it must still run on an empty host.
    call_command("check", "--tag", "staticfiles")


@pytest.mark.slow
def test_serve_refuses_to_start_without_static_files_it_cannot_collect(tmp_path):
    var = tmp_path / "var"
    var.mkdir()
    (var / "static").write_text("not a folder: collectstatic cannot write here")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))},
        "HYPERBOOK_VAR_DIR": str(var),
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.local",
        "PORT": "1",  # never reached: it must stop before serving
    }
    result = subprocess.run(
        ["bin/serve"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "hyperbook.E001" in result.stderr
    assert "manage.py collectstatic --noinput" in result.stderr
    assert "serve: not starting: no collected static files" in result.stderr
    assert not (var / "supervisord.pid").exists()
