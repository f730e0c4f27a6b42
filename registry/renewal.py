"""Delegation lifecycle: renewing a delegation (a successor with the same stakeholder, tools and
agent, its predecessor revoked when the successor's token is first used, or at once), and
revoking several with one reason. Each step is audited."""

from datetime import datetime

from django.db import transaction
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_change
from registry.delegations import DelegationError, delegation_issue, delegation_revoke
from registry.models import TokenDelegation

RETIRED_ON_FIRST_USE = "renewed: the successor's token was first used"


def delegation_renew(
    *, delegation: TokenDelegation, expires_at: datetime, revoke_now: bool, renewed_by=None
) -> tuple[TokenDelegation, str]:
    """Issue the successor (its token is returned once). The predecessor is revoked now when
    `revoke_now`, else when the successor's token is first used."""
    if delegation.revoked_at is not None:
        raise DelegationError(_("폐기된 위임은 갱신할 수 없습니다. 새로 발급하세요."))
    with transaction.atomic():
        successor, token = delegation_issue(
            stakeholder=delegation.stakeholder,
            agent_name=delegation.agent_name,
            tools=list(delegation.tools),
            expires_at=expires_at,
            created_by=renewed_by,
        )
        TokenDelegation.objects.filter(pk=successor.pk).update(renews=delegation)
        successor.renews = delegation
        audit_change(
            action=AuditEvent.Action.DELEGATION_RENEWED,
            actor=renewed_by,
            target=f"delegation:{delegation.pk}",
            before=None,
            after={
                "successor": f"delegation:{successor.pk}",
                "successor_prefix": successor.display_prefix,
                "predecessor_revoked": "now" if revoke_now else "on_first_use",
            },
        )
        if revoke_now:
            delegation_revoke(
                delegation=delegation,
                reason=_("갱신됨: 후속 위임 %(prefix)s…") % {"prefix": successor.display_prefix},
                revoked_by=renewed_by,
            )
    return successor, token


def predecessor_retire_on_first_use(*, successor_id: int) -> None:
    """The successor's token was used for the first time: its predecessor is revoked."""
    successor = TokenDelegation.objects.select_related("renews").filter(pk=successor_id).first()
    if successor is None or successor.renews is None or successor.renews.revoked_at is not None:
        return
    delegation_revoke(delegation=successor.renews, reason=RETIRED_ON_FIRST_USE)


def delegations_revoke(*, delegations, reason: str, revoked_by=None) -> int:
    """Revoke each with the same reason, all or none; returns how many this call revoked
    (already revoked ones keep their first reason)."""
    reason = (reason or "").strip()
    if not reason:
        raise DelegationError(_("폐기 사유를 입력하세요."))
    with transaction.atomic():
        return sum(
            delegation_revoke(delegation=delegation, reason=reason, revoked_by=revoked_by)
            for delegation in delegations
        )
