"""ASGI plumbing shared by /mcp and its metadata: headers, our own URL, Host check, JSON replies."""

import json
import re

_PORT_RE = re.compile(r"^[0-9]{1,5}$")  # ASCII digits only: "²".isdigit() is True


def request_headers(scope) -> dict[str, str]:
    result = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        if key not in result:  # the first value wins; duplicates cannot smuggle a second token
            result[key] = value.decode("latin-1")
    return result


def own_url(scope, headers) -> str:
    # Only reached after the Host header has passed the allowlist.
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return f"{scheme}://{headers.get('host', 'localhost')}{scope.get('path', '/mcp').rstrip('/')}"


def host_allowed(host: str, allowed_hosts) -> bool:
    """`host` is an allowed name, alone or with a port of ASCII digits (DNS-rebinding defence)."""
    host = host.lower()
    if host in allowed_hosts:
        return True
    name, _, port = host.rpartition(":")
    return bool(name) and bool(_PORT_RE.match(port)) and name in allowed_hosts


def rpc_error(code: int, message: str, request_id=None) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def json_reply(send, status: int, body: dict | None, headers=()) -> None:
    """One complete response: `body` as UTF-8 JSON (none for None), its length, then `headers`.

    Text is written as itself, as the SDK writes it: a tool's Korean answer takes half the bytes
    its \\u escapes would."""
    payload = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
    response_headers = [(b"content-length", str(len(payload)).encode()), *headers]
    if body is not None:
        response_headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": payload})
