"""Routes /mcp and its receipts to the MCP application, answers the well-known routes (the RFC
9728 metadata, the JWKS of hyperbook's ORDS assertions) itself, and sends everything else to
Django."""

import logging
from contextlib import AsyncExitStack

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from uuid_utils.compat import uuid7

from kb.assertions import signing_keys
from mcpserver.http import host_allowed, json_reply, own_url, request_headers
from mcpserver.receipts import is_receipt_path
from mcpserver.server import McpApplication

logger = logging.getLogger("hyperbook.mcp")

MCP_PATHS = ("/mcp", "/mcp/")
METADATA_PATHS = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
)
JWKS_PATH = "/.well-known/jwks.json"
WELL_KNOWN_CACHE = [(b"cache-control", b"max-age=300")]


class Router:
    def __init__(self, django_app, mcp_app: McpApplication):
        self.django_app = django_app
        self.mcp_app = mcp_app
        self._exit_stack: AsyncExitStack | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        path = scope.get("path", "")
        if scope["type"] == "http" and (path in MCP_PATHS or is_receipt_path(path)):
            return await self.mcp_app(scope, receive, send)
        if scope["type"] == "http" and path in METADATA_PATHS:
            return await _protected_resource_metadata(scope, send)
        if scope["type"] == "http" and path == JWKS_PATH:
            return await _assertion_jwks(scope, send)
        return await self.django_app(scope, receive, send)

    async def _lifespan(self, receive, send):
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self._exit_stack = AsyncExitStack()
                    await self._exit_stack.enter_async_context(self.mcp_app.running())
                except Exception as exc:
                    logger.exception("MCP application failed to start")
                    await send({"type": "lifespan.startup.failed", "message": type(exc).__name__})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._exit_stack is not None:
                    await self._exit_stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _well_known_host_allowed(headers) -> bool:
    """The Host check of every well-known route: the gate's allowlist, unless the resource URL is
    fixed by configuration, when no Host header can change what the routes say."""
    allowed = {h.lower() for h in settings.MCP_ALLOWED_HOSTS}
    return bool(settings.MCP_RESOURCE_URL) or host_allowed(headers.get("host", ""), allowed)


async def _protected_resource_metadata(scope, send):
    """RFC 9728 metadata, behind the well-known Host check."""
    headers = request_headers(scope)
    resource = settings.MCP_RESOURCE_URL or own_url({**scope, "path": "/mcp"}, headers)
    # hyperbook's own authorization server (agents sign in as their user), then any others.
    issuer = settings.OAUTH_ISSUER or resource.rsplit("/", 1)[0]
    if not _well_known_host_allowed(headers):
        status, body = 403, {"error": "Host not allowed"}
    else:
        status, body = (
            200,
            {
                "resource": resource,
                "authorization_servers": list(
                    dict.fromkeys([issuer, *settings.MCP_AUTHORIZATION_SERVERS])
                ),
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["ords.query.kb_select_ai_vpd"],
                "resource_name": "hyperbook KB VPD MCP",
            },
        )
    await json_reply(send, status, body, [*WELL_KNOWN_CACHE, _request_id_header()])


async def _assertion_jwks(scope, send):
    """The public keys that verify hyperbook's ORDS assertions (docs/ords-adapter.md), behind the
    well-known Host check."""
    headers = request_headers(scope)
    if not _well_known_host_allowed(headers):
        return await json_reply(send, 403, {"error": "Host not allowed"}, [_request_id_header()])
    try:
        keys = signing_keys(
            settings.KB_ASSERTION_SIGNING_KEY_FILE, settings.KB_ASSERTION_PREVIOUS_KEY_FILES
        )
    except ImproperlyConfigured as exc:
        logger.error("jwks unavailable: %s", exc)
        return await json_reply(
            send, 503, {"error": "signing keys unavailable"}, [_request_id_header()]
        )
    await json_reply(send, 200, keys.jwks(), [*WELL_KNOWN_CACHE, _request_id_header()])


def _request_id_header() -> tuple[bytes, bytes]:
    return (b"x-request-id", uuid7().hex.encode())
