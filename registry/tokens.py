"""VPD bearer tokens: generation, normalisation, keyed fingerprints. Raw tokens stay in memory."""

import hashlib
import hmac
import re
import secrets

from django.conf import settings

ISSUED_TOKEN_PREFIX = "hbvpd_"  # noqa: S105  (a public marker, not a secret)
# RFC 6750 b64token characters; anything else in a bearer is malformed, not a token.
TOKEN_RE = re.compile(r"^[A-Za-z0-9\-._~+/]{16,512}=*$")
BEARER_RE = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)


class MalformedToken(ValueError):
    """The value is not a usable bearer token. The message never includes the value."""


def generate_token() -> str:
    return ISSUED_TOKEN_PREFIX + secrets.token_urlsafe(32)


def normalize_token(raw: str) -> str:
    """Strip whitespace and one leading 'Bearer '; refuse anything that is not a b64token."""
    if not isinstance(raw, str):
        raise MalformedToken("token must be text")
    value = raw.strip()
    match = BEARER_RE.match(value)
    if match:
        value = match.group(1)
    if not TOKEN_RE.match(value):
        raise MalformedToken("token is not a valid bearer token")
    return value


def bearer_from_header(header_value: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; MalformedToken otherwise."""
    if not header_value:
        raise MalformedToken("no bearer token")
    match = BEARER_RE.match(header_value)
    if not match or not TOKEN_RE.match(match.group(1)):
        raise MalformedToken("malformed Authorization header")
    return match.group(1)


def token_fingerprint(token: str) -> str:
    key = settings.TOKEN_FINGERPRINT_KEY.encode()
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def display_prefix(token: str) -> str:
    """Enough to recognise a token in a list, never enough to matter: at most 10 characters."""
    if token.startswith(ISSUED_TOKEN_PREFIX):
        return token[: len(ISSUED_TOKEN_PREFIX) + 4]
    return token[:4] if len(token) >= 24 else ""
