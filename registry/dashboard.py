"""The admin index's dashboard: today's calls and refusals, delegations about to expire, the
audit delivery, the last checkpoint and each server's health; every figure links to the list
that it counts."""

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from audit import selectors as audit_selectors
from audit.models import AuditEvent, Delivery
from registry.models import McpServer, TokenDelegation

EXPIRING_WITHIN = timedelta(days=7)


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    value: str
    url: str
    alarm: bool = False


def _url(name: str, **query) -> str:
    return reverse(name) + (f"?{urlencode(query)}" if query else "")


def dashboard_figures(*, user) -> list[Figure]:
    """The figures this user may follow to their lists."""
    figures: list[Figure] = []
    if user.has_perm("audit.view_auditevent"):
        figures += _audit_figures()
    if user.has_perm("registry.view_tokendelegation"):
        now = timezone.now()
        expiring = (
            TokenDelegation.objects.usable(now=now)
            .filter(expires_at__lte=now + EXPIRING_WITHIN)
            .count()
        )
        figures.append(
            Figure(
                "expiring",
                _("7일 안에 만료되는 위임"),
                f"{expiring:,}",
                _url("admin:registry_tokendelegation_changelist", state="expiring"),
                alarm=expiring > 0,
            )
        )
    return figures


def _audit_figures() -> list[Figure]:
    today = AuditEvent.objects.filter(
        occurred_at__gte=audit_selectors.since("today"), action=AuditEvent.Action.MCP_TOOLS_CALL
    )
    events = "admin:audit_auditevent_changelist"
    calls = today.count()
    refused = today.filter(outcome__in=AuditEvent.REFUSED_OUTCOMES).count()
    figures = [
        Figure(
            "calls",
            _("오늘의 도구 호출"),
            f"{calls:,}",
            _url(events, range="today", action=AuditEvent.Action.MCP_TOOLS_CALL),
        ),
        Figure(
            "refusals",
            _("오늘 거부된 호출"),
            f"{refused:,}",
            _url(events, range="today", action=AuditEvent.Action.MCP_TOOLS_CALL, refused="1"),
            alarm=refused > 0,
        ),
    ]
    if not settings.EGS2_MEMORY_API_URL:
        figures.append(
            Figure(
                "delivery",
                _("감사 전달"),
                _("꺼짐 (Memory API가 설정되지 않음)"),
                _url(events),
            )
        )
    else:
        pending, _oldest = audit_selectors.audit_backlog()
        rejected = Delivery.objects.filter(state=Delivery.State.REJECTED).count()
        figures.append(
            Figure(
                "delivery",
                _("감사 전달 대기"),
                f"{pending:,}",
                _url(events, delivery_state=Delivery.State.PENDING),
            )
        )
        figures.append(
            Figure(
                "delivery-failing",
                _("감사 전달 거부됨"),
                f"{rejected:,}",
                _url(events, delivery_state=Delivery.State.REJECTED),
                alarm=rejected > 0,
            )
        )
    checkpoint = audit_selectors.latest_checkpoint()
    figures.append(
        Figure(
            "checkpoint",
            _("최근 서명된 체크포인트"),
            (
                _("%(number)s번 (#%(sequence)s), %(at)s")
                % {
                    "number": checkpoint.number,
                    "sequence": checkpoint.sequence,
                    "at": timezone.localtime(checkpoint.created_at).strftime("%Y-%m-%d %H:%M"),
                }
                if checkpoint
                else _("아직 없음")
            ),
            _url("admin:audit_auditcheckpoint_changelist"),
        )
    )
    return figures


def dashboard_servers(*, user) -> list[McpServer]:
    if not user.has_perm("registry.view_mcpserver"):
        return []
    return list(McpServer.objects.select_related("last_check").order_by("server_id"))
