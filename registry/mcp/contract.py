"""The KB tool's call contract, checked before anything is sent: which tool (exact allowlist
match), which arguments (only prompt and limit), and the input schema a listed tool must have."""

from __future__ import annotations

from collections.abc import Mapping

from kb.catalogue import MAX_LIMIT, MIN_LIMIT, TOOL_DEFAULT_LIMIT
from registry.declarations import McpServerDeclaration
from registry.mcp.errors import InvalidArguments, ToolContractMismatch, ToolNotAllowed

LIMIT_MIN, LIMIT_MAX = MIN_LIMIT, MAX_LIMIT
DEFAULT_LIMIT = TOOL_DEFAULT_LIMIT


def as_declaration(server) -> McpServerDeclaration:
    """An McpServer row or a declaration, as a declaration."""
    if isinstance(server, McpServerDeclaration):
        return server
    to_declaration = getattr(server, "to_declaration", None)
    if to_declaration is None:
        raise TypeError("server must be an McpServer or an McpServerDeclaration")
    return to_declaration()


def select_tool(server: McpServerDeclaration, tool: str | None = None) -> str:
    """The tool to call: the one asked for if allowlisted (exact match), else the default tool.

    A `direct` server has one allowed tool and no router: its default tool is chosen directly.
    """
    name = server.default_tool if tool is None else tool
    if not isinstance(name, str) or name not in server.tool_allowlist:
        raise ToolNotAllowed("tool is not on the server's allowlist")
    return name


def clamp_limit(limit: object, *, minimum: int = LIMIT_MIN, maximum: int = LIMIT_MAX) -> int:
    """An integer limit clamped into minimum..maximum (never outside 1..100)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidArguments("limit must be an integer")
    low, high = max(LIMIT_MIN, minimum), min(LIMIT_MAX, maximum)
    if low > high:
        low, high = LIMIT_MIN, LIMIT_MAX
    return min(max(limit, low), high)


def checked_prompt(prompt: object, *, max_length: int) -> str:
    """The prompt as sent: a non-blank string of at most `max_length` characters."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidArguments("prompt must be a non-empty string")
    if len(prompt) > max_length:
        raise InvalidArguments("prompt is too long")
    return prompt


def tool_arguments(prompt: str, limit: int) -> dict:
    """The only arguments a call ever carries."""
    return {"prompt": prompt, "limit": limit}


def check_input_schema(definition: Mapping) -> None:
    """The prompt/limit contract: prompt a string, limit an integer, nothing else required."""
    schema = definition.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ToolContractMismatch("inputSchema must be an object schema")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise ToolContractMismatch("inputSchema has no properties")
    prompt, limit = properties.get("prompt"), properties.get("limit")
    if not isinstance(prompt, Mapping) or prompt.get("type") != "string":
        raise ToolContractMismatch("prompt must be a string property")
    if not isinstance(limit, Mapping) or limit.get("type") != "integer":
        raise ToolContractMismatch("limit must be an integer property")
    required = schema.get("required", [])
    if not isinstance(required, list) or set(required) - {"prompt", "limit"}:
        raise ToolContractMismatch("only prompt and limit may be required")


def schema_bounds(definition: Mapping) -> tuple[int | None, int, int]:
    """(prompt maxLength, limit minimum, limit maximum) as the tool declares them."""
    properties = definition["inputSchema"]["properties"]
    max_length = properties["prompt"].get("maxLength")
    minimum = properties["limit"].get("minimum", LIMIT_MIN)
    maximum = properties["limit"].get("maximum", LIMIT_MAX)

    def integer(value, default):
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return integer(max_length, None), integer(minimum, LIMIT_MIN), integer(maximum, LIMIT_MAX)
