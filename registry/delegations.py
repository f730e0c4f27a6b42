"""Delegations' credentials, in one place: issuing, registering, authenticating and revoking the
bearer token of a TokenDelegation, and the one rule of whether a delegation is usable.

Every way a delegation comes to exist (the admin, the demo command, a sign-in flow) issues or
registers it here, and every request that presents a token is authenticated here: the token itself
is never stored, only its keyed fingerprint and a display prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_change, revoke_once
from core.lookups import CompiledLookup
from core.tokens import token_fingerprint
from kb.models import Stakeholder
from kb.policy import StakeholderSnapshot, query_refusal
from registry.declarations import KB_TOOL_NAME, TOOL_NAME_RE
from registry.models import (
    ACTIVE,
    EXPIRED,
    REVOKED,
    WRONG_AUDIENCE,
    TokenDelegation,
    delegation_state,
)
from registry.tokens import (
    MIN_TOKEN_BITS,
    MalformedToken,
    display_prefix,
    generate_token,
    normalize_token,
    token_is_trivial,
    token_strength_bits,
)

__all__ = [
    "ACTIVE",
    "EXPIRED",
    "REVOKED",
    "WRONG_AUDIENCE",
    "Authentication",
    "DelegationError",
    "Principal",
    "authenticate_token",
    "delegation_issue",
    "delegation_register",
    "delegation_bind_access_token",
    "delegation_grant",
    "delegation_revoke",
    "delegation_state",
]


class DelegationError(ValueError):
    """A delegation request broke a rule; the message is safe to show and names no token."""


def _checked_delegation_terms(*, tools: list[str], expires_at: datetime) -> list[str]:
    now = timezone.now()
    if expires_at <= now:
        raise DelegationError(_("만료 시각은 현재 이후여야 합니다."))
    if expires_at > now + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS):
        raise DelegationError(
            _("만료 시각은 최대 %(days)s일 이내여야 합니다.")
            % {"days": settings.DELEGATION_MAX_LIFETIME_DAYS}
        )
    tools = list(dict.fromkeys(tools))
    if not tools or any(not TOOL_NAME_RE.match(name) for name in tools):
        raise DelegationError(_("허용 도구는 MCP 도구 이름이 하나 이상이어야 합니다."))
    return tools


def delegation_issue(
    *,
    stakeholder: Stakeholder,
    agent_name: str,
    expires_at: datetime,
    tools: list[str] | None = None,
    created_by=None,
) -> tuple[TokenDelegation, str]:
    """Create a delegation with a new random token. The token is returned once and never stored."""
    tools = _checked_delegation_terms(tools=tools or [KB_TOOL_NAME], expires_at=expires_at)
    token = generate_token()
    delegation = _delegation_create(
        token=token,
        source=TokenDelegation.Source.ISSUED,
        stakeholder=stakeholder,
        agent_name=agent_name,
        tools=tools,
        expires_at=expires_at,
        created_by=created_by,
    )
    return delegation, token


def delegation_register(
    *,
    raw_token: str,
    stakeholder: Stakeholder,
    agent_name: str,
    expires_at: datetime,
    tools: list[str] | None = None,
    created_by=None,
) -> TokenDelegation:
    """Record a token issued elsewhere: only its fingerprint is kept."""
    tools = _checked_delegation_terms(tools=tools or [KB_TOOL_NAME], expires_at=expires_at)
    try:
        token = normalize_token(raw_token)
    except MalformedToken:
        raise DelegationError(_("토큰 형식이 올바르지 않습니다.")) from None
    if token_strength_bits(token) < MIN_TOKEN_BITS:
        raise DelegationError(
            _(
                "토큰이 너무 약합니다: 최소 %(bits)s비트가 필요합니다 "
                "(16진수 32자, base64url 22자 이상)."
            )
            % {"bits": MIN_TOKEN_BITS}
        )
    if token_is_trivial(token):
        raise DelegationError(_("반복되는 문자로 된 토큰은 등록할 수 없습니다."))
    if TokenDelegation.objects.filter(fingerprint=token_fingerprint(token)).exists():
        raise DelegationError(_("이미 등록된 토큰입니다."))
    return _delegation_create(
        token=token,
        source=TokenDelegation.Source.REGISTERED,
        stakeholder=stakeholder,
        agent_name=agent_name,
        tools=tools,
        expires_at=expires_at,
        created_by=created_by,
    )


def _delegation_create(*, token: str, source: str, created_by, **terms) -> TokenDelegation:
    with transaction.atomic():
        delegation = TokenDelegation.objects.create(
            fingerprint=token_fingerprint(token),
            display_prefix=display_prefix(token),
            source=source,
            audience=settings.MCP_RESOURCE_URL or "",
            created_by=created_by,
            **terms,
        )
        audit_change(
            action=AuditEvent.Action(f"registry.delegation_{source}"),
            actor=created_by,
            target=f"delegation:{delegation.pk}",
            before=None,
            after=_delegation_snapshot(delegation),
        )
    return delegation


def delegation_grant(
    *,
    stakeholder: Stakeholder,
    client_id: str,
    client_name: str,
    audience: str,
    expires_at: datetime,
    tools: list[str],
    granted_by,
    source: str = TokenDelegation.Source.SIGNED_IN,
    approved_by_idp: str = "",
) -> TokenDelegation:
    """A user's approval of an agent's sign-in (signin.grants decides who may approve), or an
    enterprise IdP's for that user (source "enterprise", SEP-990: `approved_by_idp` is its issuer,
    and the event's actor is the system, since the user approved nothing here). It has no usable
    token until the token endpoint binds the first access token to it (below)."""
    tools = _checked_delegation_terms(tools=tools, expires_at=expires_at)
    with transaction.atomic():
        delegation = TokenDelegation.objects.create(
            # The fingerprint of a token nobody ever sees: nothing answers to it.
            fingerprint=token_fingerprint(generate_token()),
            display_prefix="",
            source=source,
            stakeholder=stakeholder,
            agent_name=(client_name or client_id)[:128],
            tools=tools,
            audience=audience,
            expires_at=expires_at,
            created_by=granted_by,
            oauth_client_id=client_id[:255],
        )
        after = {**_delegation_snapshot(delegation), "client_id": delegation.oauth_client_id}
        if approved_by_idp:
            after |= {"idp": approved_by_idp, "user": granted_by.get_username()}
        audit_change(
            action=AuditEvent.Action.DELEGATION_GRANTED,
            actor=None if approved_by_idp else granted_by,
            target=f"delegation:{delegation.pk}",
            before=None,
            after=after,
        )
    return delegation


def delegation_bind_access_token(
    *, delegation: TokenDelegation, access_token: str, expires: datetime, refreshed: bool
) -> None:
    """A signed-in delegation answers to this access token from now on (the one before it stops:
    a refresh rotates it), until `expires` or the grant's own end, whichever is first."""
    updated = TokenDelegation.objects.filter(pk=delegation.pk, revoked_at__isnull=True).update(
        fingerprint=token_fingerprint(access_token),
        display_prefix=display_prefix(access_token),
        token_expires_at=min(expires, delegation.expires_at),
    )
    if updated and refreshed:
        audit_change(
            action=AuditEvent.Action.DELEGATION_REFRESHED,
            actor=delegation.created_by,
            target=f"delegation:{delegation.pk}",
            before=None,
            after={
                "client_id": delegation.oauth_client_id,
                "token_expires_at": expires.isoformat(),
            },
        )


def delegation_revoke(*, delegation: TokenDelegation, reason: str, revoked_by=None) -> bool:
    """Revoke once; a second revoke keeps the first reason. Returns whether this call revoked it."""
    reason = (reason or "").strip()
    if not reason:
        raise DelegationError(_("폐기 사유를 입력하세요."))
    return revoke_once(
        delegation,
        action=AuditEvent.Action.DELEGATION_REVOKED,
        actor=revoked_by,
        target=f"delegation:{delegation.pk}",
        snapshot=_delegation_snapshot,
        revoked_reason=reason[:500],
        revoked_by=revoked_by,
    )


def _delegation_snapshot(delegation: TokenDelegation) -> dict:
    """The non-secret fields an auditor needs: the prefix and fingerprint, never the token."""
    return {
        "stakeholder_id": delegation.stakeholder_id,
        "agent_name": delegation.agent_name,
        "tools": delegation.tools,
        "audience": delegation.audience,
        "expires_at": delegation.expires_at.isoformat(),
        "display_prefix": delegation.display_prefix,
        "fingerprint": delegation.fingerprint,
        "source": delegation.source,
        "revoked_at": delegation.revoked_at.isoformat() if delegation.revoked_at else None,
        "revoked_reason": delegation.revoked_reason,
    }


# Coarse on purpose: at most one write per delegation a minute keeps the hot path cheap.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def delegation_mark_used(*, delegation_id: int, now: datetime) -> None:
    if TokenDelegation.objects.filter(pk=delegation_id, last_used_at__isnull=True).update(
        last_used_at=now
    ):
        # Imported here: renewal builds on this module.
        from registry.renewal import predecessor_retire_on_first_use

        predecessor_retire_on_first_use(successor_id=delegation_id)
        return
    TokenDelegation.objects.filter(pk=delegation_id).filter(
        models.Q(last_used_at__isnull=True) | models.Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)


# --- authenticating a bearer ------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """Who presents a token: the delegation and its stakeholder, as read once, in one join.

    Everything after authentication decides on `asker` and reads no stakeholder again; the KB's
    data layer checks it against the stored row as it reads."""

    delegation_id: int
    asker: StakeholderSnapshot
    tools: frozenset[str]
    display_prefix: str
    fingerprint: str
    permitted: bool  # False: a valid token whose stakeholder may not query (403, not 401)

    @property
    def stakeholder_id(self) -> str:
        return self.asker.stakeholder_id

    @property
    def role(self) -> str:
        return self.asker.role


@dataclass(frozen=True)
class Authentication:
    principal: Principal | None
    failure: str = ""  # unknown, expired, revoked, wrong_audience


_delegation_by_fingerprint = CompiledLookup(
    TokenDelegation,
    lambda fingerprint: TokenDelegation.objects.filter(fingerprint=fingerprint).values_list(
        "pk",
        "expires_at",
        "revoked_at",
        "last_used_at",
        "tools",
        "audience",
        "display_prefix",
        "stakeholder__stakeholder_id",
        "stakeholder__role",
        "stakeholder__branch_id",
        "stakeholder__status",
        "token_expires_at",
    ),
)


def authenticate_token(token: str) -> Authentication:
    """Resolve a bearer token. Runs in a database thread; the token itself is never stored.

    Every request reads the database, so a revocation applies to the very next request."""
    fingerprint = token_fingerprint(token)
    row = _delegation_by_fingerprint.one(fingerprint)
    if row is None:
        return Authentication(None, "unknown")
    (
        delegation_id,
        expires_at,
        revoked_at,
        last_used_at,
        tools,
        audience,
        prefix,
        stakeholder_id,
        role,
        branch_id,
        status,
        token_expires_at,
    ) = row
    now = timezone.now()
    state = delegation_state(revoked_at, expires_at, audience, now)
    if state != ACTIVE:
        return Authentication(None, state)
    if token_expires_at is not None and token_expires_at <= now:
        return Authentication(None, EXPIRED)  # a sign-in's access token: the agent refreshes it
    if last_used_at is None or last_used_at < now - LAST_USED_RESOLUTION:
        delegation_mark_used(delegation_id=delegation_id, now=now)
    return Authentication(
        Principal(
            delegation_id=delegation_id,
            asker=StakeholderSnapshot(
                stakeholder_id=stakeholder_id, role=role, branch_id=branch_id, status=status
            ),
            tools=frozenset(tools),
            display_prefix=prefix,
            fingerprint=fingerprint,
            permitted=query_refusal(role=role, status=status, branch_id=branch_id) is None,
        )
    )
