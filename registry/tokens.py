"""VPD bearer tokens: generation, normalisation, strength. Raw tokens stay in memory.

Redaction of secret-shaped text lives in core.redaction, for every app."""

import math
import re
import secrets

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


def display_prefix(token: str) -> str:
    """Enough to recognise a token in a list, never enough to matter: at most 10 characters."""
    if token.startswith(ISSUED_TOKEN_PREFIX):
        return token[: len(ISSUED_TOKEN_PREFIX) + 4]
    return token[:4] if len(token) >= 24 else ""


# A token registered from elsewhere must carry at least this much entropy, by the rule below.
MIN_TOKEN_BITS = 128
_DIGITS = set("0123456789")
_HEX = (_DIGITS | set("abcdef"), _DIGITS | set("ABCDEF"))
_SINGLE_CASE = (
    _DIGITS | set("abcdefghijklmnopqrstuvwxyz"),
    _DIGITS | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
)


def token_strength_bits(token: str) -> float:
    """Bits a random token of this length and alphabet carries: length × log2(alphabet size).

    The alphabet is the smallest of: digits (10), hexadecimal in one case (16), letters of one
    case with digits (36), or the base64url family (64). So 128 bits take 39 digits, 32 hex
    characters, 25 single-case alphanumerics or 22 base64url characters (padding not counted)."""
    body = token.rstrip("=")
    characters = set(body)
    if characters <= _DIGITS:
        size = 10
    elif any(characters <= alphabet for alphabet in _HEX):
        size = 16
    elif any(characters <= alphabet for alphabet in _SINGLE_CASE):
        size = 36
    else:
        size = 64
    return len(body) * math.log2(size)


def token_is_trivial(token: str) -> bool:
    """Repetitive on its face: fewer than 8 different characters, one character making up more
    than half of it, or a piece at most half its length repeated (abcabcab…)."""
    body = token.rstrip("=")
    if len(set(body)) < 8:
        return True
    if max(body.count(ch) for ch in set(body)) * 2 > len(body):
        return True
    return any(
        body == (body[:period] * (len(body) // period + 1))[: len(body)]
        for period in range(1, len(body) // 2 + 1)
    )
