"""Who a person signed in through the company's OpenID Connect provider is in hyperbook.

The provider is the truth about people: at every sign-in, the claims decide the person's operator
groups (mcp_admins, auditors) and the stakeholder they act as, and hyperbook follows. Only the
groups hyperbook defines are set this way; other groups and the superuser flag stay as an
operator set them. Each change is audited as the admin's own changes are.
"""

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from audit.models import AuditEvent
from audit.services import audit_change, audit_record
from core.groups import AUDITORS, MCP_ADMINS
from kb.models import Stakeholder
from signin.models import SsoIdentity, StakeholderLogin

PRODUCT_GROUPS = (MCP_ADMINS, AUDITORS)


class SsoRefused(Exception):
    """A sign-in the provider vouched for that hyperbook still refuses; `reason` is audited and
    `message` shown to the person."""

    def __init__(self, reason: str, message: str):
        super().__init__(reason)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Claims:
    """What hyperbook reads of a person's claims (the userinfo response)."""

    issuer: str
    subject: str
    username: str
    email: str
    name: str
    groups: frozenset[str]
    stakeholder_id: str

    @classmethod
    def read(cls, issuer: str, userinfo: dict) -> "Claims":
        groups = userinfo.get(settings.OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):  # some providers send one group as a bare string
            groups = [groups]
        stakeholder = userinfo.get(settings.OIDC_STAKEHOLDER_CLAIM)
        return cls(
            issuer=issuer,
            subject=_claim_text(userinfo.get("sub"), 255),
            username=_claim_text(userinfo.get("preferred_username"), 120),
            email=_claim_text(userinfo.get("email"), 254),
            name=_claim_text(userinfo.get("name"), 150),
            groups=frozenset(_claim_text(group, 255) for group in groups if group),
            stakeholder_id=_claim_text(stakeholder, 16),
        )

    def product_groups(self) -> set[str]:
        """The hyperbook groups the provider's groups map to (OIDC_ADMIN_GROUPS, …)."""
        mapped = {
            MCP_ADMINS: settings.OIDC_ADMIN_GROUPS,
            AUDITORS: settings.OIDC_AUDITOR_GROUPS,
        }
        return {ours for ours, theirs in mapped.items() if self.groups & set(theirs)}


def _claim_text(value, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "")[:limit].strip()


@transaction.atomic
def sso_sign_in(claims: Claims, *, client_address: str = "", user_agent: str = ""):
    """The login these claims sign in: found by issuer and subject, created on first sign-in,
    with its groups and stakeholder link brought in line with the claims. Refused (SsoRefused)
    when the claims give the person nothing to do here."""
    if not claims.subject:
        raise SsoRefused("no_subject", str(_("회사 계정 정보에 사용자 식별자(sub)가 없습니다.")))
    groups = claims.product_groups()
    stakeholder = _stakeholder_named(claims.stakeholder_id)
    if not groups and stakeholder is None:
        raise SsoRefused(
            "no_role",
            str(
                _(
                    "이 회사 계정에는 hyperbook에서 쓸 권한(운영 그룹 또는 관계자 연결)이 "
                    "없습니다. 관리자에게 문의하세요."
                )
            ),
        )
    identity = (
        SsoIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=claims.issuer, subject=claims.subject)
        .first()
    )
    if identity is None:
        identity = _first_sign_in(claims)
    user = identity.user
    if not user.is_active:
        raise SsoRefused(
            "inactive", str(_("이 계정은 비활성화되어 있습니다. 관리자에게 문의하세요."))
        )
    _follow_groups(user, groups)
    link_note = _follow_stakeholder(user, stakeholder, claims.stakeholder_id)
    identity.last_sign_in_at = timezone.now()
    identity.save(update_fields=["last_sign_in_at"])
    audit_record(
        action=AuditEvent.Action.SSO_SIGNED_IN,
        outcome=AuditEvent.Outcome.ALLOWED,
        actor=user.get_username(),
        target=f"user:{user.get_username()}",
        client_address=client_address,
        user_agent=user_agent,
        stakeholder_id=stakeholder.stakeholder_id if stakeholder is not None else "",
        changes={"issuer": claims.issuer, "groups": sorted(groups)},
        detail=link_note,
    )
    return user


def sso_refusal_record(reason: str, *, client_address: str = "", user_agent: str = "") -> None:
    """An audit event for a sign-in through the provider that did not happen, with its reason
    (a short code, never the provider's response: it may hold a code or a token)."""
    audit_record(
        action=AuditEvent.Action.SSO_REFUSED,
        outcome=AuditEvent.Outcome.FORBIDDEN,
        actor="system",
        client_address=client_address,
        user_agent=user_agent,
        detail=reason,
    )


def _stakeholder_named(stakeholder_id: str) -> Stakeholder | None:
    if not stakeholder_id:
        return None
    return Stakeholder.objects.filter(stakeholder_id=stakeholder_id).first()


def _first_sign_in(claims: Claims) -> SsoIdentity:
    user_model = get_user_model()
    user = user_model(username=_free_username(claims), email=claims.email)
    user.first_name = claims.name[:150]
    user.set_unusable_password()  # this person signs in through the provider only
    user.save()
    audit_change(
        action=AuditEvent.Action.USER_CREATED,
        actor=None,
        target=f"user:{user.get_username()}",
        before=None,
        after={"username": user.get_username(), "source": "sso", "issuer": claims.issuer},
    )
    return SsoIdentity.objects.create(user=user, issuer=claims.issuer, subject=claims.subject)


def _free_username(claims: Claims) -> str:
    """The provider's preferred username when no login has it; else it with a short hash of the
    subject, so a local account of that name is never the one signed in."""
    wanted = claims.username or claims.email.split("@")[0] or "sso"
    user_model = get_user_model()
    if not user_model.objects.filter(username=wanted).exists():
        return wanted
    suffix = hashlib.sha256(f"{claims.issuer}\n{claims.subject}".encode()).hexdigest()[:8]
    return f"{wanted[:140]}.sso-{suffix}"


def _follow_groups(user, wanted: set[str]) -> None:
    current = set(user.groups.filter(name__in=PRODUCT_GROUPS).values_list("name", flat=True))
    staff = bool(wanted) or user.is_superuser
    if current == wanted and user.is_staff == staff:
        return
    user.groups.remove(*Group.objects.filter(name__in=current - wanted))
    user.groups.add(*Group.objects.filter(name__in=wanted - current))
    before = {"groups": sorted(current), "is_staff": user.is_staff}
    user.is_staff = staff
    user.save(update_fields=["is_staff"])
    audit_change(
        action=AuditEvent.Action.USER_CHANGED,
        actor=None,
        target=f"user:{user.get_username()}",
        before=before,
        after={"groups": sorted(wanted), "is_staff": staff, "source": "sso"},
    )


def _follow_stakeholder(user, stakeholder: Stakeholder | None, claimed: str) -> str:
    """Link the login to the stakeholder the claims name (or unlink it when they name none or one
    that does not exist). A stakeholder already linked to another login stays with it. Returns a
    note for the sign-in's audit event when the claim could not be followed."""
    link = StakeholderLogin.objects.select_for_update().filter(user=user).first()
    current = link.stakeholder_id if link is not None else None
    wanted = stakeholder.stakeholder_id if stakeholder is not None else None
    if wanted is not None and (
        StakeholderLogin.objects.filter(stakeholder_id=wanted).exclude(user=user).exists()
    ):
        return f"stakeholder {wanted} is linked to another login; link unchanged"
    note = f"stakeholder {claimed} does not exist; no link" if claimed and wanted is None else ""
    if current == wanted:
        return note
    if link is not None:
        link.delete()
    if stakeholder is not None:
        StakeholderLogin.objects.create(user=user, stakeholder=stakeholder)
    audit_change(
        action=AuditEvent.Action.STAKEHOLDER_LINK_CHANGED,
        actor=None,
        target=f"user:{user.get_username()}",
        before={"stakeholder_id": current} if current else None,
        after={"stakeholder_id": wanted, "source": "sso"} if wanted else None,
    )
    return note
