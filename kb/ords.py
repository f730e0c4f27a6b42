"""The production backend of the KB tool: Select AI behind Oracle REST Data Services (ORDS).

Everything assumed about the ORDS endpoint (request, caller identity, reply) lives in this module
and kb.ords_identity; docs/ords-adapter.md describes it. The rest of hyperbook only sees
kb.answers' answer shape.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _

from core.outbound import OutboundError, checked_service_url, post_json
from kb.answers import answer_build
from kb.assertions import (
    DIRECT_ACTOR,
    MAX_LIFETIME_SECONDS,
    Asker,
    ords_verifiable,
    signing_keys,
)
from kb.catalogue import TOOL_NAME
from kb.errors import KbError
from kb.ords_identity import (
    OrdsIdentity,
    TokenExchange,
    TokenExchangeFailed,
    ords_bearer,
    ords_bearer_rejected,
)
from kb.policy import PolicyRefused, StakeholderSnapshot
from kb.selectors import kb_as_of_date

log = logging.getLogger(__name__)

REPLY_MAX_BYTES = 4 * 1024 * 1024
MAX_COLUMNS = 100
MAX_NAME = 64
MAX_SUMMARY = 500
# Settings of removed identity modes (a shared credential with the stakeholder named in a header):
# warm_up() refuses a deployment that still sets one, and says what replaces it.
REMOVED_SETTINGS = {
    "ORDS_SELECT_AI_CLIENT_TOKEN": (
        "is no longer used: hyperbook no longer sends ORDS a shared client credential and an "
        "X-KB-Stakeholder-Id header; ORDS now gets an assertion hyperbook signs for each user "
        "(KB_ASSERTION_SIGNING_KEY_FILE, or an STS through ORDS_TOKEN_EXCHANGE_URL). Unset it "
        "(and its _FILE); see docs/ords-adapter.md"
    ),
}


class OrdsError(KbError):
    """ORDS did not answer usably (5xx, timeout, redirect, bad reply); the message is for users."""

    def __init__(self, message: str, *, reason: str, status: int | None = None):
        super().__init__(message, reason=reason)
        self.status = status


class OrdsRefused(PolicyRefused):
    """ORDS refused the caller: 401 (token invalid or expired) or 403 (no permission), or the
    token exchange's STS refused to issue a token for ORDS."""

    def __init__(self, message: str, *, reason: str, status: int):
        super().__init__(message, reason=reason)
        self.status = status


@dataclass(frozen=True)
class OrdsConfig:
    url: str
    timeout_seconds: float
    identity: OrdsIdentity


def ords_config() -> OrdsConfig:
    """The ORDS settings, checked; ImproperlyConfigured names what is wrong (never a secret)."""
    for name, why in REMOVED_SETTINGS.items():
        if getattr(settings, name, None):
            raise ImproperlyConfigured(f"{name} {why}")
    url = checked_service_url(settings.ORDS_SELECT_AI_URL, "ORDS_SELECT_AI_URL")
    timeout = _positive_seconds(settings, "ORDS_SELECT_AI_TIMEOUT_SECONDS")
    lifetime = settings.KB_ASSERTION_LIFETIME_SECONDS
    if isinstance(lifetime, bool) or not isinstance(lifetime, int):
        lifetime = 0
    if not 1 <= lifetime <= MAX_LIFETIME_SECONDS:
        raise ImproperlyConfigured(
            f"KB_ASSERTION_LIFETIME_SECONDS must be from 1 to {MAX_LIFETIME_SECONDS} seconds"
        )
    issuer = _assertion_issuer()
    exchange = _token_exchange(timeout)
    keys = signing_keys(
        settings.KB_ASSERTION_SIGNING_KEY_FILE, settings.KB_ASSERTION_PREVIOUS_KEY_FILES
    )
    if exchange is None:  # ORDS verifies the assertion itself: RSA keys only
        keys = ords_verifiable(keys)
    identity = OrdsIdentity(
        issuer=issuer,
        audience=settings.ORDS_AUDIENCE or _origin(url),
        resource=url,
        scope=TOOL_NAME,
        lifetime_seconds=lifetime,
        keys=keys,
        exchange=exchange,
    )
    return OrdsConfig(url=url, timeout_seconds=timeout, identity=identity)


def ords_answer(
    *,
    prompt: str,
    limit: int,
    stakeholder: StakeholderSnapshot,
    delegation_id: int | None = None,
    config: OrdsConfig | None = None,
) -> dict:
    """Ask ORDS Select AI `prompt` as `stakeholder`; the reply in kb.answers' answer shape.

    ORDS learns who asks from a token hyperbook issues for this request (kb.ords_identity), with
    the agent's delegation as the actor. Raises OrdsRefused (a PolicyRefused) on 401/403 or a
    refused token exchange, OrdsError on anything else unusable.
    """
    config = config or ords_config()
    asker = Asker(
        stakeholder_id=stakeholder.stakeholder_id,
        role=stakeholder.role,
        branch_id=stakeholder.branch_id,
        actor=DIRECT_ACTOR if delegation_id is None else str(delegation_id),
    )
    try:
        bearer = ords_bearer(asker, identity=config.identity)
    except TokenExchangeFailed as exc:
        raise _exchange_error(exc) from None
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {bearer}",
    }
    try:
        status, body = post_json(
            config.url,
            payload={"prompt": prompt, "limit": limit},
            headers=headers,
            timeout=config.timeout_seconds,
            max_bytes=REPLY_MAX_BYTES,
        )
    except OutboundError as exc:
        raise _outbound_error(exc) from None
    if status == 401:
        ords_bearer_rejected(asker, identity=config.identity)
        raise OrdsRefused(
            _("토큰이 유효하지 않거나 만료됨"), reason="ords_unauthorized", status=401
        )
    if status == 403:
        raise OrdsRefused(_("이 사용자에게 조회 권한 없음"), reason="ords_forbidden", status=403)
    if status == 429:
        raise OrdsError(
            _("ORDS 요청이 너무 많습니다. 잠시 후 다시 시도하세요."),
            reason="rate_limited",
            status=429,
        )
    if status >= 500:
        raise OrdsError(
            _("ORDS Select AI 서버 오류입니다 (HTTP %(status)s).") % {"status": status},
            reason="server_error",
            status=status,
        )
    if status != 200:
        raise OrdsError(
            _("ORDS Select AI가 예상하지 못한 응답을 보냈습니다 (HTTP %(status)s).")
            % {"status": status},
            reason="unexpected_status",
            status=status,
        )
    return answer_from_reply(_json_object(body), limit=limit, stakeholder=stakeholder)


def answer_from_reply(reply: dict, *, limit: int, stakeholder: StakeholderSnapshot) -> dict:
    """Map the assumed ORDS reply ({"items", "columns"?, "hasMore"?, ...}) to the answer shape."""
    items = reply.get("items")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise _bad_reply(_("items가 객체 목록이 아닙니다"))
    columns = _columns(reply.get("columns"), items)
    names = [name for name, _label in columns]
    rows = [{name: _cell(item.get(name)) for name in names} for item in items[:limit]]
    masked = reply.get("masked_columns")
    masked = [m for m in masked if m in names] if isinstance(masked, list) else []
    summary = reply.get("summary")
    summary = summary[:MAX_SUMMARY] if isinstance(summary, str) and summary else None
    interpretation = {
        "summary": summary or "ORDS Select AI 응답",
        "source": "ords",
        "scope": "조회 권한 범위 기준 (ORDS VPD 적용)",
    }
    return answer_build(
        columns=columns,
        rows=rows,
        truncated=len(items) > limit or reply.get("hasMore") is True,
        limit=limit,
        masked_columns=masked,
        as_of=_as_of(reply.get("as_of")),
        stakeholder_id=stakeholder.stakeholder_id,
        role=stakeholder.role,
        branch_id=stakeholder.branch_id,
        interpretation=interpretation,
    )


# --- identity -------------------------------------------------------------------------------


def _assertion_issuer() -> str:
    """KB_ASSERTION_ISSUER, else the origin of MCP_RESOURCE_URL: this deployment, as ORDS' JWT
    profile names it."""
    configured = settings.KB_ASSERTION_ISSUER
    if configured:
        return checked_service_url(configured, "KB_ASSERTION_ISSUER")
    resource = settings.MCP_RESOURCE_URL
    if resource:
        return _origin(checked_service_url(resource, "MCP_RESOURCE_URL"))
    raise ImproperlyConfigured(
        "KB_QUERY_BACKEND=ords needs MCP_RESOURCE_URL or KB_ASSERTION_ISSUER: the issuer (iss) "
        "of the assertions ORDS verifies"
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _token_exchange(timeout: float) -> TokenExchange | None:
    url = settings.ORDS_TOKEN_EXCHANGE_URL
    if not url:
        return None
    url = checked_service_url(url, "ORDS_TOKEN_EXCHANGE_URL")
    client_id = settings.ORDS_TOKEN_EXCHANGE_CLIENT_ID
    secret = settings.ORDS_TOKEN_EXCHANGE_CLIENT_SECRET
    if not client_id:
        raise ImproperlyConfigured("ORDS_TOKEN_EXCHANGE_URL needs ORDS_TOKEN_EXCHANGE_CLIENT_ID")
    if not secret:
        raise ImproperlyConfigured(
            "ORDS_TOKEN_EXCHANGE_URL needs ORDS_TOKEN_EXCHANGE_CLIENT_SECRET_FILE"
        )
    return TokenExchange(
        url=url, client_id=client_id, client_secret=secret, timeout_seconds=timeout
    )


def _exchange_error(exc: TokenExchangeFailed) -> OrdsError | OrdsRefused:
    if exc.reason == "exchange_refused":
        return OrdsRefused(
            _("ORDS용 토큰 발급이 거부되었습니다 (토큰 교환)."),
            reason=exc.reason,
            status=exc.status or 401,
        )
    return OrdsError(
        _("ORDS용 토큰을 발급받지 못했습니다 (토큰 교환)."), reason=exc.reason, status=exc.status
    )


# --- reply mapping ----------------------------------------------------------------------------


def _json_object(body: bytes) -> dict:
    try:
        reply = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError):
        raise _bad_reply(_("JSON이 아닙니다")) from None
    if not isinstance(reply, dict):
        raise _bad_reply(_("JSON 객체가 아닙니다"))
    return reply


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _columns(declared: object, items: list[dict]) -> list[tuple[str, str]]:
    """Declared columns ({"name","label"} objects or names) in order, else the items' keys."""
    columns: dict[str, str] = {}
    if isinstance(declared, list):
        for column in declared:
            if isinstance(column, str):
                name, label = column, column
            elif isinstance(column, dict) and isinstance(column.get("name"), str):
                name = column["name"]
                label = column["label"] if isinstance(column.get("label"), str) else name
            else:
                raise _bad_reply(_("columns 항목이 올바르지 않습니다"))
            columns.setdefault(_column_name(name), label[:MAX_NAME] or name)
    elif declared is None:
        for item in items:
            for name in item:
                if name != "links":  # ORDS adds hypermedia links to AutoREST items
                    columns.setdefault(_column_name(name), name)
    else:
        raise _bad_reply(_("columns가 목록이 아닙니다"))
    if len(columns) > MAX_COLUMNS:
        raise _bad_reply(_("열이 너무 많습니다"))
    return list(columns.items())


def _column_name(name: str) -> str:
    if not name or len(name) > MAX_NAME or any(ord(ch) < 0x20 for ch in name):
        raise _bad_reply(_("열 이름이 올바르지 않습니다"))
    return name


def _cell(value: object) -> str | int | float | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):  # the answer schema has no booleans
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _as_of(value: object) -> dt.date:
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            pass
    return kb_as_of_date()


def _bad_reply(detail: str) -> OrdsError:
    return OrdsError(
        _("ORDS Select AI 응답을 해석할 수 없습니다: %(detail)s.") % {"detail": detail},
        reason="invalid_reply",
        status=200,
    )


def _outbound_error(exc: OutboundError) -> OrdsError:
    messages = {
        "timeout": _("ORDS Select AI 응답 시간이 초과되었습니다. 자동으로 다시 시도하지 않습니다."),
        "redirect": _(
            "ORDS Select AI가 리디렉션을 보냈습니다. 따라가지 않습니다 (설정 확인 필요)."
        ),
        "too_large": _("ORDS Select AI 응답이 너무 큽니다."),
    }
    message = messages.get(exc.reason) or _("ORDS Select AI에 연결할 수 없습니다.")
    return OrdsError(message, reason=exc.reason, status=exc.status)


def _positive_seconds(source, name: str) -> float:
    value = getattr(source, name, None)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ImproperlyConfigured(f"{name} must be a positive number of seconds")
    return float(value)
