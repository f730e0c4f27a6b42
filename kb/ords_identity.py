"""The bearer ORDS receives for one request: hyperbook's own signed assertion for the asker, or,
with ORDS_TOKEN_EXCHANGE_URL, the token an STS issued in exchange for it (RFC 8693).

Never the caller's token: the MCP authorization rules forbid passing it through to an upstream.
"""

from __future__ import annotations

import json
import re
import threading
import time
from base64 import b64encode
from dataclasses import dataclass, field
from urllib.parse import quote

from core.outbound import OutboundError, post_form
from kb.assertions import Asker, SigningKeys, assertion_issue

EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_TYPE_JWT = "urn:ietf:params:oauth:token-type:jwt"
REQUESTED_TYPE_ACCESS = "urn:ietf:params:oauth:token-type:access_token"
EXCHANGE_REPLY_MAX_BYTES = 64 * 1024
# An exchanged token is dropped this long before it expires, so ORDS never gets one that
# expires on the way.
EXPIRY_MARGIN_SECONDS = 10
CACHE_MAX_ENTRIES = 10_000
_TOKEN = re.compile(r"^[\x21-\x7e]{1,8192}$")  # visible ASCII: nothing that could split a header


@dataclass(frozen=True)
class TokenExchange:
    url: str
    client_id: str
    client_secret: str = field(repr=False)
    timeout_seconds: float


@dataclass(frozen=True)
class OrdsIdentity:
    """How hyperbook says who asks: the assertion's claims and key, and the optional STS."""

    issuer: str
    audience: str
    resource: str  # ORDS_SELECT_AI_URL: the RFC 8707 resource the STS issues a token for
    scope: str
    lifetime_seconds: int
    keys: SigningKeys = field(repr=False)
    exchange: TokenExchange | None = None


class TokenExchangeFailed(Exception):
    """The STS gave no usable token. `reason`: exchange_refused (400/401/403), exchange_failed
    (another status or a reply without a bearer token), or exchange_ plus core.outbound's reason.
    Carries neither the assertion nor the STS's reply."""

    def __init__(self, reason: str, *, status: int | None = None):
        super().__init__(reason if status is None else f"{reason} HTTP {status}")
        self.reason = reason
        self.status = status


def ords_bearer(asker: Asker, *, identity: OrdsIdentity) -> str:
    """The token to send ORDS in `Authorization: Bearer` for `asker`."""
    if identity.exchange is None:
        return _assertion(asker, identity)
    key = _cache_key(asker, identity)
    token = _exchanged.get(key)
    if token is None:
        token, expires_in = _exchange(_assertion(asker, identity), identity)
        _exchanged.put(key, token, expires_in)
    return token


def ords_bearer_rejected(asker: Asker, *, identity: OrdsIdentity) -> None:
    """ORDS refused the bearer (401): the next request asks the STS again instead of reusing it."""
    if identity.exchange is not None:
        _exchanged.forget(_cache_key(asker, identity))


def _assertion(asker: Asker, identity: OrdsIdentity) -> str:
    return assertion_issue(
        asker=asker,
        issuer=identity.issuer,
        audience=identity.audience,
        scope=identity.scope,
        lifetime_seconds=identity.lifetime_seconds,
        key=identity.keys.current,
    )


def _cache_key(asker: Asker, identity: OrdsIdentity) -> tuple:
    # The exchanged token speaks for this user and this agent, to this ORDS, from this STS.
    assert identity.exchange is not None  # asked only of an identity that exchanges
    return (asker, identity.audience, identity.resource, identity.exchange.url)


def _exchange(assertion: str, identity: OrdsIdentity) -> tuple[str, float | None]:
    exchange = identity.exchange
    assert exchange is not None  # called only for an identity that exchanges
    credential = f"{quote(exchange.client_id, safe='')}:{quote(exchange.client_secret, safe='')}"
    form = {
        "grant_type": EXCHANGE_GRANT,
        "subject_token": assertion,
        "subject_token_type": SUBJECT_TYPE_JWT,
        "requested_token_type": REQUESTED_TYPE_ACCESS,
        "resource": identity.resource,
        "audience": identity.audience,
        "scope": identity.scope,
    }
    headers = {
        "Accept": "application/json",
        # RFC 6749 §2.3.1: client_secret_basic, each part form-encoded first.
        "Authorization": "Basic " + b64encode(credential.encode()).decode("ascii"),
    }
    try:
        status, body = post_form(
            exchange.url,
            form=form,
            headers=headers,
            timeout=exchange.timeout_seconds,
            max_bytes=EXCHANGE_REPLY_MAX_BYTES,
        )
    except OutboundError as exc:
        raise TokenExchangeFailed(f"exchange_{exc.reason}", status=exc.status) from None
    if status in (400, 401, 403):
        raise TokenExchangeFailed("exchange_refused", status=status)
    if status != 200:
        raise TokenExchangeFailed("exchange_failed", status=status)
    try:
        reply = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise TokenExchangeFailed("exchange_failed", status=status) from None
    token = reply.get("access_token") if isinstance(reply, dict) else None
    token_type = reply.get("token_type") if isinstance(reply, dict) else None
    if not isinstance(token, str) or not _TOKEN.match(token):
        raise TokenExchangeFailed("exchange_failed", status=status)
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenExchangeFailed("exchange_failed", status=status)
    expires_in = reply.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        expires_in = None
    return token, expires_in


class _ExchangedTokens:
    """Exchanged tokens in this process's memory only, each until shortly before it expires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[tuple, tuple[str, float]] = {}

    def get(self, key: tuple) -> str | None:
        with self._lock:
            entry = self._tokens.get(key)
            if entry is None:
                return None
            if entry[1] <= time.monotonic():
                del self._tokens[key]
                return None
            return entry[0]

    def put(self, key: tuple, token: str, expires_in: float | None) -> None:
        if expires_in is None or expires_in <= EXPIRY_MARGIN_SECONDS:
            return  # no known lifetime, or too short to reuse: used for this request only
        now = time.monotonic()
        with self._lock:
            if len(self._tokens) >= CACHE_MAX_ENTRIES:
                self._tokens = {k: v for k, v in self._tokens.items() if v[1] > now}
                while len(self._tokens) >= CACHE_MAX_ENTRIES:
                    del self._tokens[next(iter(self._tokens))]
            self._tokens[key] = (token, now + expires_in - EXPIRY_MARGIN_SECONDS)

    def forget(self, key: tuple) -> None:
        with self._lock:
            self._tokens.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()


_exchanged = _ExchangedTokens()
