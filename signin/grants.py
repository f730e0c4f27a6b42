"""Signing an agent in, as rules: who may grant, what a grant is (a TokenDelegation, under the
same rules as an issued one), how its access token is bound and renewed, and how it ends."""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from audit.models import AuditEvent
from audit.services import audit_record, client_text, refusal_budget_admit, request_origin
from kb.models import Stakeholder
from kb.policy import query_refusal
from registry.delegations import DelegationError, delegation_grant, delegation_revoke
from registry.models import TokenDelegation
from signin.models import StakeholderLogin


class GrantRefused(DelegationError):
    """The signed-in user may not grant this (no stakeholder, or terms outside the rules)."""


@dataclass(frozen=True)
class GrantTerms:
    tools: list[str]
    expires_at: datetime


def stakeholder_of(user) -> Stakeholder | None:
    """The stakeholder a login acts as, or None (it can then grant nothing)."""
    if not getattr(user, "is_authenticated", False):
        return None
    link = StakeholderLogin.objects.select_related("stakeholder").filter(user=user).first()
    return link.stakeholder if link is not None else None


def default_grant_expiry(now: datetime | None = None) -> datetime:
    days = min(settings.OAUTH_GRANT_DAYS, settings.DELEGATION_MAX_LIFETIME_DAYS)
    return (now or timezone.now()) + timedelta(days=days)


def grant_approve(
    *, user, client_id: str, client_name: str, resource: str, terms: GrantTerms
) -> TokenDelegation:
    """The user's yes on the consent page: a delegation acting as their stakeholder for this
    client, audited as delegation.granted. It has no usable token yet: the code exchange binds
    the first access token to it."""
    stakeholder = stakeholder_of(user)
    if stakeholder is None:
        raise GrantRefused(_("이 로그인에는 연결된 관계자가 없어 에이전트를 승인할 수 없습니다."))
    refusal = query_refusal(
        role=stakeholder.role, status=stakeholder.status, branch_id=stakeholder.branch_id
    )
    if refusal is not None:  # it could grant nothing /mcp would answer
        raise GrantRefused(str(refusal))
    return delegation_grant(
        stakeholder=stakeholder,
        client_id=client_id,
        client_name=client_name,
        audience=resource,
        expires_at=terms.expires_at,
        tools=terms.tools,
        granted_by=user,
    )


def grant_bind_token_family(*, delegation: TokenDelegation, family: uuid.UUID) -> None:
    TokenDelegation.objects.filter(pk=delegation.pk).update(oauth_token_family=family)


def grant_for_family(family: uuid.UUID | None) -> TokenDelegation | None:
    if family is None:
        return None
    return TokenDelegation.objects.filter(oauth_token_family=family).first()


def grant_is_live(delegation: TokenDelegation | None) -> bool:
    return delegation is not None and delegation.state(now=timezone.now()) == "active"


def grant_revoke(*, delegation: TokenDelegation, reason: str, revoked_by=None) -> bool:
    """End the grant: the delegation (so /mcp refuses its token at the next request) and every
    token of its refresh family (so it cannot be renewed). Audited once."""
    with transaction.atomic():
        revoked = delegation_revoke(delegation=delegation, reason=reason, revoked_by=revoked_by)
        if delegation.oauth_token_family is not None:
            _revoke_family(delegation.oauth_token_family)
    return revoked


def _revoke_family(family: uuid.UUID) -> None:
    now = timezone.now()
    refresh_tokens = get_refresh_token_model().objects.filter(token_family=family)
    get_access_token_model().objects.filter(source_refresh_token__in=refresh_tokens).update(
        expires=now
    )
    get_access_token_model().objects.filter(refresh_token__in=refresh_tokens).update(expires=now)
    refresh_tokens.filter(revoked__isnull=True).update(revoked=now)


# The delegations the token endpoint makes: a user's consent, or an enterprise IdP's ID-JAG for
# that user (SEP-990). Both are the user's grants: listed on their page, revocable there.
GRANT_SOURCES = (TokenDelegation.Source.SIGNED_IN, TokenDelegation.Source.ENTERPRISE)


def grants_visible_to(user):
    """The grants a user's page lists: their own; everyone's for those who may see every
    delegation (auditors, mcp_admins)."""
    grants = TokenDelegation.objects.filter(source__in=GRANT_SOURCES).select_related(
        "stakeholder", "created_by"
    )
    if user.has_perm("registry.view_tokendelegation"):
        return grants
    return grants.filter(created_by=user)


def grant_revocable_by(user, delegation: TokenDelegation) -> bool:
    """Their own grant, or any for those who may change delegations (mcp_admins)."""
    return delegation.created_by_id == user.pk or user.has_perm("registry.change_tokendelegation")


# --- refusals at the token endpoint -------------------------------------------------------------

# A refresh token presented again within this many seconds of its rotation is taken for the same
# agent's concurrent refresh (two workers sharing its tokens, a retry after a timeout): refused,
# and the grant stays. Later, it is reuse (RFC 9700 §4.14.2): one of its holders is not the agent,
# and the whole grant ends. A code has no such allowance: a client exchanges it once.
REFRESH_RACE_SECONDS = 10


class TokenRefusal(StrEnum):
    """Why the token endpoint refused, as its audit event's detail says."""

    UNSUPPORTED_GRANT = "unsupported_grant_type"  # a grant hyperbook does not offer
    CODE_REPLAYED = "code_replayed"  # a code presented again: what it produced is revoked
    CODE_FAILED = "code_failed"  # a found code failed its checks (PKCE, redirect URI): burnt
    REFRESH_REUSED = "refresh_token_reused"  # a rotated refresh token: the grant ends
    REFRESH_RACED = "refresh_token_raced"  # lost a concurrent refresh: refused, grant stays
    ASSERTION_INVALID = "assertion_invalid"  # an ID-JAG not (yet) verified: anyone can send one
    ASSERTION_REFUSED = "assertion_refused"  # a verified ID-JAG refused (claims, replay, mapping)


# Refusals anyone can cause without holding anything (an unsupported grant) are recorded up to the
# per-address budget (audit.services.refusal_budget_admit), as /mcp's are. The others each concern
# a grant, and are always recorded.
_BUDGETED = {TokenRefusal.UNSUPPORTED_GRANT, TokenRefusal.ASSERTION_INVALID}


def token_refusal_record(request, refusal: TokenRefusal, delegation=None, reason: str = "") -> None:
    """An audit event for a refused token request (`request` is oauthlib's: its headers are the
    Django request's META). Names the client, the grant type and the grant, never a secret;
    `reason` (what the client was told) follows the refusal in the detail."""
    origin = request_origin(getattr(request, "headers", None) or {})
    address = origin["client_address"]
    detail = f"{refusal}: {client_text(reason, 256)}" if reason else str(refusal)
    if refusal in _BUDGETED:
        admission = refusal_budget_admit(kind="token-refusals", address=address)
        if not admission.record:
            return
        if admission.first_past:
            detail = f"{refusal}: budget reached, rest of window not recorded"
    audit_record(
        action=AuditEvent.Action.OAUTH_TOKEN_REFUSED,
        outcome=AuditEvent.Outcome.FORBIDDEN,
        http_status=400,
        **origin,
        stakeholder_id=delegation.stakeholder_id if delegation is not None else "",
        delegation_id=delegation.pk if delegation is not None else None,
        actor="system",
        target=f"delegation:{delegation.pk}" if delegation is not None else "",
        changes={
            "grant_type": client_text(getattr(request, "grant_type", "")),
            "client_id": client_text(getattr(request, "client_id", "")),
        },
        detail=detail,
    )
