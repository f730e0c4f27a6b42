"""Secret-shaped text, found and replaced wherever text from outside is kept or shown."""

import re

# Secret-shaped text a peer might echo back: a bearer header value, or one of our own tokens.
SECRET_SHAPES = re.compile(
    r"(?i:\bbearer\s+)[A-Za-z0-9\-._~+/]+=*|\b(?:hbvpd|hbapi|hboat|hbort)_[A-Za-z0-9\-._~+/]+=*"
)
REDACTED = "[redacted]"
MAX_REDACT_DEPTH = 64


class TooDeeplyNested(ValueError):
    """A value nested deeper than any answer we accept (MAX_REDACT_DEPTH)."""


def looks_like_secret(text: str, known: str | None = None) -> bool:
    return bool((known and known in text) or SECRET_SHAPES.search(text))


def redact_secrets(value, *, known: tuple[str, ...] = (), depth: int = 0):
    """A copy of a JSON value with every known secret and every secret-shaped string replaced.

    A server that echoes the Authorization header it received (in a result, an error, a tool
    description or its own name) must not get our user's token onto a page, into the database or
    into the audit log. Values nested deeper than MAX_REDACT_DEPTH are refused, not walked."""
    if depth > MAX_REDACT_DEPTH:
        raise TooDeeplyNested("nested too deeply")
    if isinstance(value, str):
        for secret in known:
            if secret:
                value = value.replace(secret, REDACTED)
        return SECRET_SHAPES.sub(REDACTED, value)
    if isinstance(value, dict):
        return {
            redact_secrets(k, known=known, depth=depth + 1): redact_secrets(
                v, known=known, depth=depth + 1
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(v, known=known, depth=depth + 1) for v in value]
    return value
