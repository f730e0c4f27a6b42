"""The one rule for URLs hyperbook sends requests (and credentials) to: HTTPS, or plain HTTP to a
loopback host; no user information, query or fragment; nothing that could be read two ways."""

import ipaddress
from urllib.parse import urlsplit, urlunsplit


class UnsafeUrl(ValueError):
    """The URL breaks the rule. The message names the setting or field, never the URL itself."""


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
