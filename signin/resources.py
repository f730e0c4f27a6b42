"""The one resource this authorization server issues tokens for (/mcp), and its own issuer."""

from django.conf import settings
from django.http import HttpRequest


def _origin_of(request) -> str:
    if not isinstance(request, HttpRequest):
        # An oauthlib request: the toolkit hands it the Django request's META as its headers,
        # and marks a secure one (as its own issuer helper reads it).
        headers = request.headers
        django_request = HttpRequest()
        django_request.META = dict(headers)
        scheme = "https" if headers.get("X_DJANGO_OAUTH_TOOLKIT_SECURE") else "http"
        return f"{scheme}://{django_request.get_host()}"
    return f"{request.scheme}://{request.get_host()}"


def resource_url_for(request) -> str:
    """MCP_RESOURCE_URL; else /mcp on the origin the request came to (Host is behind
    ALLOWED_HOSTS), as the protected-resource metadata says when it is unset."""
    return settings.MCP_RESOURCE_URL or f"{_origin_of(request)}/mcp"


def issuer_for(request) -> str:
    """OAUTH_ISSUER (which defaults to the origin of MCP_RESOURCE_URL); else the request's
    origin."""
    return settings.OAUTH_ISSUER or _origin_of(request)
