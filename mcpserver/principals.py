"""Who is asking: a VPD bearer token resolved to its delegation and stakeholder."""

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from core.lookups import CompiledLookup
from core.tokens import token_fingerprint
from kb.policy import StakeholderSnapshot, query_refusal
from registry.models import TokenDelegation
from registry.services import LAST_USED_RESOLUTION, delegation_mark_used


@dataclass(frozen=True)
class Principal:
    """Who asks on /mcp: the delegation and its stakeholder as read once, in the gate's join.

    Everything after the gate decides on `asker` and reads no stakeholder again; the data layer
    checks it against the stored row as it reads."""

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
    failure: str = ""  # unknown, expired, revoked


def audience_accepted(audience: str) -> bool:
    """A token is for the resource it was issued for: once this deployment names its resource
    (MCP_RESOURCE_URL), a delegation issued for another one is refused here. Delegations issued
    before any resource was named carry none and stay valid."""
    resource = settings.MCP_RESOURCE_URL
    return not (audience and resource and audience != resource)


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
    ) = row
    now = timezone.now()
    state = TokenDelegation(revoked_at=revoked_at, expires_at=expires_at).state(now=now)
    if state != "active":
        return Authentication(None, state)
    if not audience_accepted(audience):
        return Authentication(None, "wrong_audience")
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
