"""How hyperbook talks to other services: the one rule for the URLs it sends requests (and
credentials) to, and the one way its HTTP clients are built and their answers read.

URLs: HTTPS, or plain HTTP to a loopback host; no user information, query or fragment; nothing
that could be read two ways. Clients: redirects are never followed (a credential must not reach
another origin), proxies and .netrc are never taken from the environment, every client has the
caller's timeout (each caller's own setting), and a body is read only up to a cap.
"""

import ipaddress
import ssl
import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.core.exceptions import ImproperlyConfigured


class UnsafeUrl(ValueError):
    """The URL breaks the rule. The message names the setting or field, never the URL itself."""


class OutboundError(Exception):
    """A request to another service failed before a usable answer (timeout, redirect, transport,
    a body past its cap). `reason` is one of timeout, redirect, too_large, unreachable."""

    def __init__(self, reason: str, *, status: int | None = None, detail: str = ""):
        super().__init__(" ".join(x for x in (reason, detail, status and f"HTTP {status}") if x))
        self.reason = reason
        self.status = status


class ResponseTooLarge(OutboundError):
    """The answer's body went past its byte cap; nothing more of it was read."""

    def __init__(self, *, status: int | None = None):
        super().__init__("too_large", status=status)


def is_loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def checked_url(url: str, *, name: str) -> str:
    """The URL without query and fragment (there are none), host lower-cased; UnsafeUrl if it
    could leak a credential or reach somewhere unintended."""
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in url):
        raise UnsafeUrl(f"{name} contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeUrl(f"{name} is not a valid URL") from exc
    if "@" in parts.netloc:
        raise UnsafeUrl(f"{name} must not contain user information")
    if "?" in url or parts.query:
        raise UnsafeUrl(f"{name} must not contain a query string")
    if "#" in url or parts.fragment:
        raise UnsafeUrl(f"{name} must not contain a fragment")
    if parts.scheme not in ("https", "http"):
        raise UnsafeUrl(f"{name} must use https")
    host = parts.hostname or ""
    if not host:
        raise UnsafeUrl(f"{name} must name a host")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise UnsafeUrl(f"{name} must use https (plain http only for loopback hosts)")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise UnsafeUrl(f"{name} must not contain . or .. path segments")
    netloc = parts.netloc.lower() if port is None else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def checked_service_url(raw: object, setting: str) -> str:
    """A service URL from a setting, checked by `checked_url`; ImproperlyConfigured names the
    setting (never the URL) when it is missing or unsafe."""
    url = raw.strip() if isinstance(raw, str) else ""
    if not url:
        raise ImproperlyConfigured(f"{setting} is not set")
    try:
        checked_url(url, name=setting)
    except UnsafeUrl as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return url


# --- clients and bodies ---------------------------------------------------------------------------


def _client_options(timeout: float, headers: Mapping[str, str] | None) -> dict:
    return {
        "timeout": httpx.Timeout(timeout),
        "follow_redirects": False,
        "trust_env": False,
        "headers": dict(headers or {}),
    }


def outbound_client(
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> httpx.Client:
    """A client that never follows a redirect nor reads proxies or .netrc from the environment.
    `timeout` (seconds, from the caller's setting) bounds each connect, write and read."""
    return httpx.Client(**_client_options(timeout, headers), verify=verify)


def outbound_async_client(
    *, timeout: float, headers: Mapping[str, str] | None = None
) -> httpx.AsyncClient:
    """`outbound_client`, for callers on an event loop."""
    return httpx.AsyncClient(**_client_options(timeout, headers))


class ByteBudget:
    """How many bytes an answer may still take, counted as they arrive (inside a line too)."""

    def __init__(self, max_bytes: int):
        self.left = max_bytes

    def take(self, chunk: bytes, *, status: int | None = None) -> bytes:
        self.left -= len(chunk)
        if self.left < 0:
            raise ResponseTooLarge(status=status)
        return chunk


def read_capped(
    response: httpx.Response, *, max_bytes: int, deadline: float | None = None
) -> bytes:
    """The body of a streamed response, never more than `max_bytes` of it (ResponseTooLarge past
    that). `deadline` (time.monotonic()) bounds the whole read, not just each chunk."""
    budget, chunks = ByteBudget(max_bytes), []
    for chunk in response.iter_bytes():
        chunks.append(budget.take(chunk, status=response.status_code))
        if deadline is not None and time.monotonic() > deadline:
            raise OutboundError("timeout")
    return b"".join(chunks)


def post_json(
    url: str, *, payload: dict, headers: Mapping[str, str], timeout: float, max_bytes: int
) -> tuple[int, bytes]:
    """POST JSON; (status, body). A 3xx raises OutboundError("redirect"): it is never followed.

    `timeout` bounds the whole exchange, not just each read, and the body is capped at
    `max_bytes`; neither a slow nor a huge reply can hold a worker.
    """
    return _post(url, headers=headers, timeout=timeout, max_bytes=max_bytes, json=payload)


def post_form(
    url: str, *, form: dict, headers: Mapping[str, str], timeout: float, max_bytes: int
) -> tuple[int, bytes]:
    """`post_json` for an application/x-www-form-urlencoded body (an OAuth token endpoint)."""
    return _post(url, headers=headers, timeout=timeout, max_bytes=max_bytes, data=form)


def post_text(
    url: str, *, body: str, headers: Mapping[str, str], timeout: float, max_bytes: int
) -> tuple[int, bytes, str]:
    """`post_json` for a text body; (status, body, its Content-Type)."""
    return _post(
        url,
        headers=headers,
        timeout=timeout,
        max_bytes=max_bytes,
        content=body.encode(),
        with_type=True,
    )


def _post(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    max_bytes: int,
    with_type: bool = False,
    **content,
):
    deadline = time.monotonic() + timeout
    try:
        with (
            outbound_client(timeout=timeout) as client,
            client.stream("POST", url, headers=headers, **content) as response,
        ):
            if 300 <= response.status_code < 400:
                raise OutboundError("redirect", status=response.status_code)
            body = read_capped(response, max_bytes=max_bytes, deadline=deadline)
            if with_type:
                return response.status_code, body, response.headers.get("content-type", "")
            return response.status_code, body
    except httpx.TimeoutException:
        raise OutboundError("timeout") from None
    except httpx.HTTPError as exc:
        raise OutboundError("unreachable", detail=type(exc).__name__) from None


def get_capped(
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
    connect_to: str | None = None,
    verify: ssl.SSLContext | bool = True,
) -> tuple[int, httpx.Headers, bytes]:
    """GET; (status, headers, body), under the same caps as `post_json`. `connect_to` is the
    address already checked for the URL's host: the connection goes there, while TLS (SNI and
    the certificate) and the Host header still name the host, so a second DNS answer cannot
    move the request elsewhere."""
    deadline = time.monotonic() + timeout
    parts = urlsplit(url)
    target, extensions = url, {}
    if connect_to is not None:
        address = f"[{connect_to}]" if ":" in connect_to else connect_to
        netloc = address if parts.port is None else f"{address}:{parts.port}"
        target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        extensions = {"sni_hostname": parts.hostname}
    request_headers = {**(headers or {}), "Host": parts.netloc}
    try:
        with (
            outbound_client(timeout=timeout, verify=verify) as client,
            client.stream(
                "GET", target, headers=request_headers, extensions=extensions
            ) as response,
        ):
            if 300 <= response.status_code < 400:
                raise OutboundError("redirect", status=response.status_code)
            body = read_capped(response, max_bytes=max_bytes, deadline=deadline)
            return response.status_code, response.headers, body
    except httpx.TimeoutException:
        raise OutboundError("timeout") from None
    except httpx.HTTPError as exc:
        raise OutboundError("unreachable", detail=type(exc).__name__) from None
