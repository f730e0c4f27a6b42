"""Tests: fixed, obviously non-production secrets; the database comes from DATABASE_URL."""

import os

from kb.assertions import signing_key_file_generated

from .base import *  # noqa: F403
from .base import DATABASES, VAR_DIR
from .env import env_str

# One test database per test run (several runs may share a machine). For SQLite a file, not
# memory: end-to-end tests run a real server process against the same database.
_RUN = os.environ.get("HYPERBOOK_TEST_RUN_ID") or str(os.getpid())
VAR_DIR.mkdir(parents=True, exist_ok=True)  # a fresh clone has no var/ yet
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_hyperbook_{_RUN}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{_RUN}"}

SECRET_KEY = "test-only-secret-key-not-for-production-use-0123456789"  # noqa: S105
TOKEN_FINGERPRINT_KEY = "test-only-fingerprint-key-0123456789abcdef"  # noqa: S105
# A fixed checkpoint signer, so that every process of a test run (workers, servers) signs alike.
AUDIT_ORIGIN = "test.hyperbook.invalid/audit"
AUDIT_SIGNING_KEY = (
    "PRIVATE+KEY+test.hyperbook.invalid/audit+35d94097+AV0e0xmUH77Ifg1BQLxwlcNRWts+FCF/uzV6EHcfIzF6"
)
# One ORDS assertion key per machine's test runs, so that every process of a run signs alike.
# RSA, as ORDS verifies; a new name, so that an older run's Ed25519 key in var/ is not picked up.
KB_ASSERTION_SIGNING_KEY_FILE = env_str("KB_ASSERTION_SIGNING_KEY_FILE") or str(
    signing_key_file_generated(VAR_DIR / "test_kb_assertion_rsa_key.pem")
)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LANGUAGE_CODE = "ko"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# In-process broker unless a test starts real workers (it then sets CELERY_BROKER_URL).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "memory://"
if CELERY_BROKER_URL != "filesystem://":
    CELERY_BROKER_TRANSPORT = None
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
# Serve the admin's static files straight from the apps (no collectstatic in tests).
WHITENOISE_USE_FINDERS = True
