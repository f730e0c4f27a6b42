"""Reads from the registry."""

from django.utils import timezone

from registry.models import McpServer, TokenDelegation
from registry.tokens import token_fingerprint


def server_declarations_export() -> list[dict]:
    servers = McpServer.objects.prefetch_related("allowed_tools").order_by("server_id")
    return [server.to_declaration().as_mapping() for server in servers]


def server_get_enabled(*, server_id: str) -> McpServer | None:
    return McpServer.objects.filter(server_id=server_id, enabled=True).first()


def delegation_for_token_is_usable(*, token: str, stakeholder) -> bool:
    delegation = TokenDelegation.objects.filter(fingerprint=token_fingerprint(token)).first()
    return (
        delegation is not None
        and delegation.stakeholder_id == stakeholder.stakeholder_id
        and delegation.state(now=timezone.now()) == "active"
    )
