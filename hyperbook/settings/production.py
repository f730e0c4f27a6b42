"""Production: every secret must come from the environment (or a *_FILE); nothing is generated."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .env import env_bool, env_int, env_str, required_secret

SECRET_KEY = required_secret("DJANGO_SECRET_KEY")
TOKEN_FINGERPRINT_KEY = required_secret("TOKEN_FINGERPRINT_KEY")
AUDIT_SIGNING_KEY = required_secret("AUDIT_SIGNING_KEY")  # see `manage.py audit_verifier_key`
# The log's name in its signed checkpoints: one per deployment, never a shared default.
AUDIT_ORIGIN = env_str("AUDIT_ORIGIN")
if not AUDIT_ORIGIN:
    raise ImproperlyConfigured("AUDIT_ORIGIN must be set in production (e.g. kb.example.com/audit)")

# The key that signs ORDS assertions: an RSA private key of 2048 to 4096 bits in PEM, mode 0600
# (Ed25519 or P-256 only with ORDS_TOKEN_EXCHANGE_URL; see base.py).
KB_ASSERTION_SIGNING_KEY_FILE = env_str("KB_ASSERTION_SIGNING_KEY_FILE")
if not KB_ASSERTION_SIGNING_KEY_FILE:
    raise ImproperlyConfigured(
        "KB_ASSERTION_SIGNING_KEY_FILE must be set in production: the private key (PEM) that "
        "signs the assertions ORDS receives; see docs/ords-adapter.md"
    )

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
KB_DB_ROLE_CHECK = env_str("KB_DB_ROLE_CHECK", "refuse")
# Staff who log in with a local password add an authenticator app before anything else (single
# sign-on sessions are not asked: the company's provider does the second factor).
LOGIN_REQUIRE_TOTP = env_bool("LOGIN_REQUIRE_TOTP", True)
