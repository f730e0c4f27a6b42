"""Client ID Metadata Documents, fetched the way hyperbook fetches anything: through
core.outbound (no redirects, a time cap, a size cap), from a public address only, unless the host
is listed in OAUTH_CIMD_ALLOWED_HOSTS. The toolkit caches the result (the client's row, until the
document's max-age) and backs off after a failure."""

import ipaddress
import json
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings
from oauth2_provider.cimd import CIMDError

from core.outbound import OutboundError, get_capped

NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _public(address: str) -> bool:
    """Globally routable, judging an IPv6 form that embeds an IPv4 address (mapped, 6to4, Teredo,
    NAT64) by that IPv4 address: else a crafted AAAA record could reach an internal one."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:
            return all(part.is_global for part in ip.teredo)
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    return ip.is_global


def checked_document_url(client_id: str):
    """The client_id as a URL the draft allows: https, a host, a path, no user information,
    fragment or dot segments. CIMDError otherwise."""
    try:
        parts = urlsplit(client_id)
        port = parts.port
    except ValueError as exc:
        raise CIMDError("client_id is not a valid URL") from exc
    if parts.scheme != "https" or not parts.hostname:
        raise CIMDError("client_id must be an https URL with a host")
    if "@" in parts.netloc or parts.fragment or "#" in client_id:
        raise CIMDError("client_id must not carry user information or a fragment")
    if not parts.path or any(segment in (".", "..") for segment in parts.path.split("/")):
        raise CIMDError("client_id must have a path without dot segments")
    return parts, port or 443


def _address_for(host: str, port: int) -> str:
    """The address to connect to: each one the host resolves to must be public, unless the host
    is listed (then the first, whatever it is)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise CIMDError("client_id host does not resolve") from exc
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise CIMDError("client_id host does not resolve")
    if host.lower() not in {h.lower() for h in settings.OAUTH_CIMD_ALLOWED_HOSTS}:
        if not all(_public(address) for address in addresses):
            raise CIMDError("client_id host is not a public address")
    return addresses[0]


class OutboundMetadataFetcher:
    """The toolkit's CIMD_METADATA_FETCHER: fetch(client_id) -> (document, max_age)."""

    def fetch(self, client_id: str):
        from oauth2_provider.cimd import _effective_max_age  # the toolkit's Cache-Control rule

        parts, port = checked_document_url(client_id)
        address = _address_for(parts.hostname, port)
        verify = (
            ssl.create_default_context(cafile=settings.OAUTH_CIMD_CA_BUNDLE)
            if settings.OAUTH_CIMD_CA_BUNDLE
            else True
        )
        try:
            status, headers, body = get_capped(
                client_id,
                timeout=settings.OAUTH_CIMD_TIMEOUT_SECONDS,
                max_bytes=settings.OAUTH_CIMD_MAX_BYTES,
                headers={"Accept": "application/json"},
                connect_to=address,
                verify=verify,
            )
        except OutboundError as exc:
            raise CIMDError(f"client_id document could not be fetched: {exc.reason}") from None
        if status != 200:
            raise CIMDError(f"client_id document answered HTTP {status}")
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json" and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise CIMDError("client_id document is not JSON")
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise CIMDError("client_id document is not valid JSON") from exc
        if not isinstance(document, dict):
            raise CIMDError("client_id document is not a JSON object")
        _check_redirect_uris(document)
        return document, _effective_max_age(headers.get("cache-control"))


def checked_redirect_uri(uri: str) -> str:
    """ "" if a public client may use this redirect URI (https anywhere, plain http to loopback
    only, no fragment), else what is wrong with it."""
    parts = urlsplit(uri)
    if parts.fragment or "#" in uri:
        return "must not contain a fragment"
    if parts.scheme == "https" and parts.hostname:
        return ""
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "::1", "localhost"):
        return ""
    return "must be https, or http to a loopback address"


def _check_redirect_uris(document: dict) -> None:
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise CIMDError("redirect_uris must be a non-empty list of URLs")
    for uri in uris:
        if checked_redirect_uri(uri):
            raise CIMDError(f"redirect URI {checked_redirect_uri(uri)}")
