"""Keyed fingerprints: what is stored or logged instead of a secret, comparable, never readable."""

import hashlib
import hmac

from django.conf import settings


def keyed_fingerprint(value: str, *, context: str = "") -> str:
    """HMAC-SHA256 under TOKEN_FINGERPRINT_KEY; `context` keeps fingerprints of different kinds of
    value apart (a prompt never fingerprints like a token of the same text)."""
    key = settings.TOKEN_FINGERPRINT_KEY.encode()
    return hmac.new(key, (context + value).encode(), hashlib.sha256).hexdigest()


def token_fingerprint(token: str) -> str:
    return keyed_fingerprint(token)
