"""Writes to the registry. The admin and the import command both come through here."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from registry.declarations import (
    DeclarationError,
    FieldError,
    McpServerDeclaration,
    validate_mcp_server,
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


def server_save(*, declaration: McpServerDeclaration) -> tuple[McpServer, str]:
    """Create or update a server and its allowlist; say if it was created, updated or unchanged."""
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
    return server, outcome


def servers_import(*, rows: Iterable[object]) -> ImportReport:
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
            _, outcome = server_save(declaration=declaration)
            getattr(report, outcome).append(declaration.id)
    return report
