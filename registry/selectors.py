"""Reads from the registry."""

from registry.models import McpServer


def server_declarations_export() -> list[dict]:
    servers = McpServer.objects.prefetch_related("allowed_tools").order_by("server_id")
    return [server.to_declaration().as_mapping() for server in servers]


def server_get_enabled(*, server_id: str) -> McpServer | None:
    return McpServer.objects.filter(server_id=server_id, enabled=True).first()
