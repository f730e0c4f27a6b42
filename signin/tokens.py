"""The tokens an agent gets by signing in. Prefixed like VPD tokens, so that redaction and a
person reading a log both know one when they see it; 256 random bits each."""

import secrets

ACCESS_TOKEN_PREFIX = "hboat_"  # noqa: S105  (public markers, not secrets)
REFRESH_TOKEN_PREFIX = "hbort_"  # noqa: S105


def new_access_token(request=None) -> str:
    return ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_refresh_token(request=None) -> str:
    return REFRESH_TOKEN_PREFIX + secrets.token_urlsafe(32)
