"""Tests: fixed, obviously non-production secrets; the database comes from DATABASE_URL."""

from .base import *  # noqa: F403
from .base import DATABASES, VAR_DIR

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory: end-to-end tests run a real server process against the same database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_hyperbook.sqlite3")}

SECRET_KEY = "test-only-secret-key-not-for-production-use-0123456789"  # noqa: S105
TOKEN_FINGERPRINT_KEY = "test-only-fingerprint-key-0123456789abcdef"  # noqa: S105
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LANGUAGE_CODE = "ko"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
