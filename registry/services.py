"""Writes to the registry. The admin and the import command both come through here."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_change
from kb.models import Stakeholder
from registry.declarations import (
    KB_TOOL_NAME,
    TOOL_NAME_RE,
    DeclarationError,
    FieldError,
    McpServerDeclaration,
    validate_mcp_server,
)
from registry.models import AllowedTool, McpServer, TokenDelegation
from registry.tokens import (
    MIN_TOKEN_BITS,
    MalformedToken,
    display_prefix,
    generate_token,
    normalize_token,
    token_fingerprint,
    token_is_trivial,
    token_strength_bits,
)


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def server_save(*, declaration: McpServerDeclaration, actor=None) -> tuple[McpServer, str]:
    """Create or update a server and its allowlist; say if it was created, updated or unchanged.

    The change and its audit event (before/after of the declaration, which holds no secret) commit
    together."""
    values = {
        "enabled": declaration.enabled,
        "provider": declaration.provider,
        "transport": declaration.transport,
        "base_url_env": declaration.base_url_env,
        "endpoint_path": declaration.endpoint_path,
        "endpoint_url": declaration.endpoint_url,
        "token_env": declaration.token_env,
        "auth_delivery": declaration.auth_delivery,
        "timeout_seconds_env": declaration.timeout_seconds_env,
        "timeout_seconds": declaration.timeout_seconds,
        "default_tool": declaration.default_tool,
        "router_mode": declaration.router_mode,
        "description": declaration.description,
    }
    with transaction.atomic():
        server = McpServer.objects.select_for_update().filter(server_id=declaration.id).first()
        before = server.to_declaration().as_mapping() if server is not None else None
        if server is None:
            server = McpServer.objects.create(server_id=declaration.id, **values)
            outcome = "created"
        elif server.to_declaration() == declaration:
            return server, "unchanged"
        else:
            for name, value in values.items():
                setattr(server, name, value)
            server.save()
            outcome = "updated"
        wanted = set(declaration.tool_allowlist)
        server.allowed_tools.exclude(tool_name__in=wanted).delete()
        existing = set(server.allowed_tools.values_list("tool_name", flat=True))
        AllowedTool.objects.bulk_create(
            AllowedTool(server=server, tool_name=name) for name in sorted(wanted - existing)
        )
        audit_change(
            action=AuditEvent.Action(f"registry.server_{outcome}"),
            actor=actor,
            target=declaration.id,
            before=before,
            after=declaration.as_mapping(),
        )
    return server, outcome


def server_delete(*, server: McpServer, actor=None) -> None:
    """Remove a server with its allowlist and pins; the audit event keeps its last declaration."""
    with transaction.atomic():
        before = server.to_declaration().as_mapping()
        server_id = server.server_id
        server.delete()
        audit_change(
            action=AuditEvent.Action.SERVER_DELETED,
            actor=actor,
            target=server_id,
            before=before,
            after=None,
        )


def servers_import(*, rows: Iterable[object], actor=None) -> ImportReport:
    """Validate every row first; write all of them in one transaction, or none if any is invalid."""
    report = ImportReport()
    declarations: list[McpServerDeclaration] = []
    seen: set[str] = set()
    for row in rows:
        try:
            declaration = validate_mcp_server(row)
        except DeclarationError as exc:
            report.errors.append(exc)
            continue
        if declaration.id in seen:
            duplicate = FieldError("id", "appears more than once in the file")
            report.errors.append(DeclarationError(declaration.id, [duplicate]))
            continue
        seen.add(declaration.id)
        declarations.append(declaration)
    if report.errors:
        return report
    with transaction.atomic():
        for declaration in declarations:
            _, outcome = server_save(declaration=declaration, actor=actor)
            getattr(report, outcome).append(declaration.id)
    return report


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


def delegation_revoke(*, delegation: TokenDelegation, reason: str, revoked_by=None) -> bool:
    """Revoke once; a second revoke keeps the first reason. Returns whether this call revoked it."""
    reason = (reason or "").strip()
    if not reason:
        raise DelegationError(_("폐기 사유를 입력하세요."))
    with transaction.atomic():
        before = _delegation_snapshot(delegation)
        updated = TokenDelegation.objects.filter(pk=delegation.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=reason[:500], revoked_by=revoked_by
        )
        delegation.refresh_from_db()
        if updated:
            audit_change(
                action=AuditEvent.Action.DELEGATION_REVOKED,
                actor=revoked_by,
                target=f"delegation:{delegation.pk}",
                before=before,
                after=_delegation_snapshot(delegation),
            )
    return bool(updated)


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
    TokenDelegation.objects.filter(pk=delegation_id).filter(
        models.Q(last_used_at__isnull=True) | models.Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
