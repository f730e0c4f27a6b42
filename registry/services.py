"""Writes to the registry's servers: saving, deleting and importing their declarations.

Delegations' credentials are in registry.delegations, the discover and call flow in
registry.mcp.calls and a person's exchange in registry.console_exchange; their names stay
importable from here for the admin, the commands, the console and kb_ask."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from audit.models import AuditEvent
from audit.services import audit_change
from registry.declarations import (
    DeclarationError,
    FieldError,
    McpServerDeclaration,
    validate_mcp_server,
)
from registry.delegations import (  # noqa: F401 (the credentials' home; callers may use either)
    LAST_USED_RESOLUTION,
    DelegationError,
    delegation_issue,
    delegation_mark_used,
    delegation_register,
    delegation_revoke,
)
from registry.models import AllowedTool, McpServer


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


# The discover and call flow, and a person's exchange, live beside the client and the console;
# their names stay importable from here.
from registry.console_exchange import (  # noqa: E402, F401
    Exchange,
    ExchangeRefused,
    failure_outcome,
    mcp_exchange_audit,
    mcp_exchange_run,
)
from registry.mcp.calls import (  # noqa: E402, F401
    DEFAULT_TIMEOUT_SECONDS,
    CallResult,
    Discovery,
    bearer_for,
    effective_timeout,
    kb_tool_call,
    kb_tools_discover,
    resolve_endpoint,
)
