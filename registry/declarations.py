"""Pure validation of MCP server declarations and safe resolution of their endpoints.

No database or network here: the import command, the admin and the MCP client all call these, so a
declaration is judged by one set of rules wherever it comes from.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from core.outbound import UnsafeUrl, checked_url
from kb.catalogue import TOOL_NAME

KB_PROVIDER = "kb_vpd_streamable_http"
VECTOR_PROVIDER = "kb_vector"
CUSTOM_PYTHON_PROVIDER = "custom_python"
PROVIDERS = (KB_PROVIDER, VECTOR_PROVIDER, CUSTOM_PYTHON_PROVIDER)

STREAMABLE_HTTP = "streamable_http"
TRANSPORTS = (STREAMABLE_HTTP,)
ROUTER_MODES = ("direct", "llm")
AUTH_DELIVERIES = ("per_request_vpd_bearer", "service_token_env", "none")

KB_TOOL_NAME = TOOL_NAME
DEFAULT_KB_BASE_URL_ENV = "KB_MCP_BASE_URL"
DEFAULT_TIMEOUT_ENV = "POC3_MCP_TIMEOUT_SECONDS"

# MCP tool naming rule: 1..128 characters of A-Z a-z 0-9 _ - .
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
SERVER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
# A service credential lives in a variable named for it, never in one of hyperbook's own secrets
# (DJANGO_SECRET_KEY, EGS2_MEMORY_API_TOKEN, …) that an admin could otherwise send to a server.
SERVICE_TOKEN_ENV_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,110}_MCP(_ACCESS)?_TOKEN$")

PER_REQUEST_VPD_BEARER = "per_request_vpd_bearer"

# Keys that would put a KB server's URL or credential in the registry; the KB contract forbids them.
KB_FORBIDDEN_KEYS = ("endpoint_url", "token_env", "POC3_MCP_TOKEN", "BACKOFFICE_MCP_ACCESS_TOKEN")

COMMON_KEYS = {
    "id",
    "enabled",
    "provider",
    "transport",
    "default_tool",
    "tool_allowlist",
    "router_mode",
    "description",
    "auth_delivery",
    "timeout_seconds_env",
    "timeout_seconds",
}
KB_KEYS = COMMON_KEYS | {"base_url_env", "endpoint_path"}
LEGACY_KEYS = COMMON_KEYS | {"endpoint_url", "token_env"}


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class DeclarationError(ValueError):
    """A declaration broke the contract; `errors` names every offending field."""

    def __init__(self, server_id: str, errors: list[FieldError]):
        self.server_id = server_id
        self.errors = errors
        super().__init__(f"{server_id}: " + "; ".join(str(e) for e in errors))


class EndpointError(UnsafeUrl):
    """The endpoint URL could not be resolved safely; the message never repeats the URL."""


@dataclass(frozen=True)
class McpServerDeclaration:
    id: str
    provider: str
    transport: str = STREAMABLE_HTTP
    enabled: bool = True
    default_tool: str = ""
    tool_allowlist: tuple[str, ...] = ()
    router_mode: str = "direct"
    description: str = ""
    auth_delivery: str = "none"
    timeout_seconds_env: str = DEFAULT_TIMEOUT_ENV
    timeout_seconds: int | None = None
    base_url_env: str = ""
    endpoint_path: str = ""
    endpoint_url: str = ""
    token_env: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def is_kb(self) -> bool:
        return self.provider == KB_PROVIDER

    def as_mapping(self) -> dict:
        """The declaration in the file format, with only the keys its provider uses."""
        data = {
            "id": self.id,
            "enabled": self.enabled,
            "provider": self.provider,
            "transport": self.transport,
        }
        if self.is_kb:
            data["base_url_env"] = self.base_url_env
            data["endpoint_path"] = self.endpoint_path
        else:
            data["endpoint_url"] = self.endpoint_url
            if self.token_env:
                data["token_env"] = self.token_env
        data["auth_delivery"] = self.auth_delivery
        if self.timeout_seconds_env:
            data["timeout_seconds_env"] = self.timeout_seconds_env
        if self.timeout_seconds is not None:
            data["timeout_seconds"] = self.timeout_seconds
        data["default_tool"] = self.default_tool
        data["tool_allowlist"] = list(self.tool_allowlist)
        data["router_mode"] = self.router_mode
        data["description"] = self.description
        return data


def validate_mcp_server(mapping: object) -> McpServerDeclaration:
    """Validate a declaration: KB ones by the KB contract, the others in their legacy format."""
    if not isinstance(mapping, Mapping):
        raise DeclarationError("?", [FieldError("(row)", "must be a JSON object")])
    if mapping.get("provider") == KB_PROVIDER or mapping.get("id") == "kb_mcp":
        return validate_kb_mcp_server(mapping)
    return _validate_legacy_server(mapping)


def validate_kb_mcp_server(mapping: Mapping) -> McpServerDeclaration:
    """Validate a KB VPD declaration; anything that could carry a URL or token fails closed."""
    server_id = _server_id_for_messages(mapping)
    errors: list[FieldError] = []
    for key in KB_FORBIDDEN_KEYS:
        if key in mapping:
            errors.append(
                FieldError(key, "not allowed in a KB declaration (URL and token never live here)")
            )
    if mapping.get("provider") != KB_PROVIDER:
        errors.append(FieldError("provider", f"a KB declaration must use provider {KB_PROVIDER}"))
    for key in sorted(set(mapping) - KB_KEYS - set(KB_FORBIDDEN_KEYS)):
        errors.append(FieldError(key, "unknown field"))

    common = _validate_common(mapping, errors)
    base_url_env = mapping.get("base_url_env", DEFAULT_KB_BASE_URL_ENV)
    if base_url_env != DEFAULT_KB_BASE_URL_ENV:
        # The one server that receives users' bearers has its URL from this variable only.
        errors.append(FieldError("base_url_env", f"must be {DEFAULT_KB_BASE_URL_ENV}"))
    endpoint_path = mapping.get("endpoint_path", "/mcp")
    if not isinstance(endpoint_path, str) or endpoint_path != "/mcp":
        errors.append(FieldError("endpoint_path", "must be /mcp for the KB server"))
    if common.get("auth_delivery") not in (None, PER_REQUEST_VPD_BEARER):
        errors.append(
            FieldError("auth_delivery", "must be per_request_vpd_bearer for the KB server")
        )
    if errors:
        raise DeclarationError(server_id, errors)
    return McpServerDeclaration(
        **common,
        provider=KB_PROVIDER,
        base_url_env=base_url_env,
        endpoint_path=endpoint_path,
    )


def _validate_legacy_server(mapping: Mapping) -> McpServerDeclaration:
    server_id = _server_id_for_messages(mapping)
    errors: list[FieldError] = []
    provider = mapping.get("provider")
    if provider not in (VECTOR_PROVIDER, CUSTOM_PYTHON_PROVIDER):
        errors.append(FieldError("provider", f"must be one of {', '.join(PROVIDERS)}"))
    for key in sorted(set(mapping) - LEGACY_KEYS):
        errors.append(FieldError(key, "unknown field"))
    common = _validate_common(mapping, errors)
    endpoint_url = mapping.get("endpoint_url")
    if not isinstance(endpoint_url, str) or not endpoint_url:
        errors.append(FieldError("endpoint_url", "required for this provider"))
    else:
        try:
            endpoint_url = _checked_url(endpoint_url, field_name="endpoint_url")
        except EndpointError as exc:
            errors.append(FieldError("endpoint_url", str(exc)))
    token_env = mapping.get("token_env", "")
    if token_env and (not isinstance(token_env, str) or not ENV_NAME_RE.match(token_env)):
        errors.append(FieldError("token_env", "must be an environment variable name, not a value"))
    elif token_env and not SERVICE_TOKEN_ENV_RE.match(token_env):
        errors.append(FieldError("token_env", "a service token variable's name ends in _MCP_TOKEN"))
    auth_delivery = mapping.get("auth_delivery")
    if auth_delivery == PER_REQUEST_VPD_BEARER:
        errors.append(
            FieldError(
                "auth_delivery",
                "a user's VPD bearer goes only to the KB VPD server; use none or service_token_env",
            )
        )
    elif auth_delivery == "service_token_env" and not token_env:
        errors.append(FieldError("token_env", "required with auth_delivery service_token_env"))
    if errors:
        raise DeclarationError(server_id, errors)
    assert isinstance(provider, str) and isinstance(endpoint_url, str)  # checked above
    if auth_delivery is None:
        common["auth_delivery"] = "service_token_env" if token_env else "none"
    return McpServerDeclaration(
        **common, provider=provider, endpoint_url=endpoint_url, token_env=token_env or ""
    )


def _validate_common(mapping: Mapping, errors: list[FieldError]) -> dict:
    server_id = mapping.get("id")
    if not isinstance(server_id, str) or not SERVER_ID_RE.match(server_id):
        errors.append(FieldError("id", "required: lowercase letters, digits, _ or -, up to 64"))
    enabled = mapping.get("enabled", True)
    if not isinstance(enabled, bool):
        errors.append(FieldError("enabled", "must be true or false"))
    transport = mapping.get("transport", STREAMABLE_HTTP)
    if transport not in TRANSPORTS:
        errors.append(FieldError("transport", "must be streamable_http"))
    router_mode = mapping.get("router_mode", "direct")
    if router_mode not in ROUTER_MODES:
        errors.append(FieldError("router_mode", f"must be one of {', '.join(ROUTER_MODES)}"))
    auth_delivery = mapping.get("auth_delivery")
    if auth_delivery is not None and auth_delivery not in AUTH_DELIVERIES:
        errors.append(FieldError("auth_delivery", f"must be one of {', '.join(AUTH_DELIVERIES)}"))
    description = mapping.get("description", "")
    if not isinstance(description, str) or len(description) > 1000:
        errors.append(FieldError("description", "must be text of at most 1000 characters"))
    timeout_env = mapping.get("timeout_seconds_env", DEFAULT_TIMEOUT_ENV)
    if timeout_env and (not isinstance(timeout_env, str) or not ENV_NAME_RE.match(timeout_env)):
        errors.append(FieldError("timeout_seconds_env", "must be an environment variable name"))
    timeout = mapping.get("timeout_seconds")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 600
    ):
        errors.append(FieldError("timeout_seconds", "must be an integer from 1 to 600"))

    allowlist = mapping.get("tool_allowlist")
    tools: tuple[str, ...] = ()
    if not isinstance(allowlist, list) or not allowlist:
        errors.append(FieldError("tool_allowlist", "must list at least one tool"))
    else:
        bad = [t for t in allowlist if not isinstance(t, str) or not TOOL_NAME_RE.match(t)]
        if bad:
            errors.append(FieldError("tool_allowlist", "tool names are 1-128 of A-Z a-z 0-9 _ - ."))
        elif len(set(allowlist)) != len(allowlist):
            errors.append(FieldError("tool_allowlist", "lists a tool twice"))
        else:
            tools = tuple(allowlist)
    default_tool = mapping.get("default_tool", "")
    if not isinstance(default_tool, str) or not default_tool:
        errors.append(FieldError("default_tool", "required"))
    elif tools and default_tool not in tools:
        errors.append(FieldError("default_tool", "must be one of the tool_allowlist"))
    if router_mode == "direct" and tools and len(tools) != 1:
        errors.append(FieldError("router_mode", "direct routing needs exactly one allowed tool"))
    return {
        "id": server_id if isinstance(server_id, str) else "",
        "enabled": enabled is True,
        "transport": transport,
        "router_mode": router_mode,
        "auth_delivery": auth_delivery or PER_REQUEST_VPD_BEARER,
        "description": description if isinstance(description, str) else "",
        "timeout_seconds_env": timeout_env or "",
        "timeout_seconds": timeout if isinstance(timeout, int) else None,
        "tool_allowlist": tools,
        "default_tool": default_tool if isinstance(default_tool, str) else "",
    }


def _server_id_for_messages(mapping: Mapping) -> str:
    server_id = mapping.get("id")
    if isinstance(server_id, str) and SERVER_ID_RE.match(server_id):
        return server_id
    return "?"


def resolve_kb_mcp_endpoint(server: McpServerDeclaration, environ: Mapping[str, str]) -> str:
    """The server's MCP URL: for KB, its base URL variable joined with /mcp; never endpoint_url."""
    if not server.is_kb:
        return _checked_url(server.endpoint_url, field_name="endpoint_url")
    env_name = server.base_url_env or DEFAULT_KB_BASE_URL_ENV
    base = (environ.get(env_name) or "").strip()
    if not base:
        raise EndpointError(f"{env_name} is not set")
    base = _checked_url(base, field_name=env_name)
    scheme, netloc, path, _, _ = urlsplit(base)
    path = path.rstrip("/")
    endpoint_path = server.endpoint_path or "/mcp"
    if path.endswith(endpoint_path):
        raise EndpointError(f"{env_name} must be the base URL, without {endpoint_path}")
    return urlunsplit((scheme, netloc, path + endpoint_path, "", ""))


def _checked_url(url: str, *, field_name: str) -> str:
    try:
        return checked_url(url, name=field_name)
    except UnsafeUrl as exc:
        raise EndpointError(str(exc)) from None
