"""Reads from the registry."""

from dataclasses import dataclass

from django.utils import timezone

from core.tokens import token_fingerprint
from registry.models import ACTIVE, AllowedTool, McpServer, TokenDelegation, ToolPin


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
        and delegation.state(now=timezone.now()) == ACTIVE
    )


@dataclass(frozen=True)
class DelegatedTool:
    name: str
    held_on: tuple[str, ...]  # servers whose pin holds the tool (changed or never approved)


@dataclass(frozen=True)
class DelegationTools:
    delegation: TokenDelegation
    tools: tuple[DelegatedTool, ...]


def stakeholder_delegated_tools(*, stakeholder_id: str) -> list[DelegationTools]:
    """The stakeholder's usable delegations and the tools each allows, each with the servers whose
    pinning holds it (calls to a held tool are refused until an admin approves its definition)."""
    delegations = list(
        TokenDelegation.objects.usable(now=timezone.now())
        .filter(stakeholder_id=stakeholder_id)
        .order_by("-created_at")
    )
    names = {name for delegation in delegations for name in delegation.tools}
    held: dict[str, list[str]] = {}
    pins = ToolPin.objects.filter(tool_name__in=names).exclude(pending_hash="")
    for tool_name, server_id in pins.values_list("tool_name", "server__server_id"):
        held.setdefault(tool_name, []).append(server_id)
    return [
        DelegationTools(
            delegation,
            tuple(
                DelegatedTool(name, tuple(sorted(held.get(name, ())))) for name in delegation.tools
            ),
        )
        for delegation in delegations
    ]


def delegable_tools() -> dict[str, tuple[str, ...]]:
    """Every tool a delegation may allow: those on the allowlists of the enabled servers, each
    with the servers that allow it."""
    allowed = AllowedTool.objects.filter(server__enabled=True).order_by("tool_name")
    servers: dict[str, list[str]] = {}
    for tool_name, server_id in allowed.values_list("tool_name", "server__server_id"):
        servers.setdefault(tool_name, []).append(server_id)
    return {name: tuple(sorted(ids)) for name, ids in servers.items()}
