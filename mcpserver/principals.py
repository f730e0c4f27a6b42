"""Who is asking: a VPD bearer token resolved to its delegation and stakeholder."""

from dataclasses import dataclass

from django.utils import timezone

from kb.models import Stakeholder
from registry.models import TokenDelegation
from registry.services import delegation_mark_used
from registry.tokens import token_fingerprint

PERMITTED_ROLES = frozenset(Stakeholder.Role.values)


@dataclass(frozen=True)
class Principal:
    delegation_id: int
    stakeholder_id: str
    role: str
    branch_id: str | None
    tools: frozenset[str]
    display_prefix: str
    fingerprint: str
    permitted: bool  # False: a valid token whose stakeholder may not query (403, not 401)


@dataclass(frozen=True)
class Authentication:
    principal: Principal | None
    failure: str = ""  # unknown, expired, revoked


def authenticate_token(token: str) -> Authentication:
    """Resolve a bearer token. Runs in a database thread; the token itself is never stored."""
    fingerprint = token_fingerprint(token)
    delegation = (
        TokenDelegation.objects.select_related("stakeholder")
        .filter(fingerprint=fingerprint)
        .first()
    )
    if delegation is None:
        return Authentication(None, "unknown")
    now = timezone.now()
    state = delegation.state(now=now)
    if state != "active":
        return Authentication(None, state)
    stakeholder = delegation.stakeholder
    delegation_mark_used(delegation_id=delegation.pk, now=now)
    return Authentication(
        Principal(
            delegation_id=delegation.pk,
            stakeholder_id=stakeholder.stakeholder_id,
            role=stakeholder.role,
            branch_id=stakeholder.branch_id,
            tools=frozenset(delegation.tools),
            display_prefix=delegation.display_prefix,
            fingerprint=fingerprint,
            permitted=stakeholder.is_active and stakeholder.role in PERMITTED_ROLES,
        )
    )
