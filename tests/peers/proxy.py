"""A loopback forwarder that adds a bearer token, for peers that cannot send one.

The official conformance suite cannot send an Authorization header (its issue #453). Rather than
give the product an auth-off switch, the tests put this proxy in front of the real server: it
forwards the method, path, query, headers (Host and Origin exactly as the peer sent them, so the
server's own DNS-rebinding checks are what the peer sees) and body, and sets one header,
`Authorization: Bearer <token>`. Responses come back unchanged, streamed.
"""

import socket
import threading
import time
from contextlib import contextmanager

import httpx
import uvicorn

# Hop-by-hop headers (RFC 9110 §7.6.1) and the ones the two HTTP stacks compute themselves.
_REQUEST_SKIP = {
    "authorization",
    "connection",
    "content-length",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
_RESPONSE_SKIP = {
    "connection",
    "content-length",
    "keep-alive",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


class BearerProxy:
    """ASGI app: forward every HTTP request to `upstream` with `Authorization: Bearer <token>`."""

    def __init__(self, token: str, upstream: str = ""):
        self.token = token
        self.upstream = upstream  # base URL of the real server; may be set once the proxy runs
        self.url = ""  # this proxy's own base URL, once it listens
        self.seen: list[dict] = []  # what the peer sent (method, path, host, origin), in order

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in scope["headers"]
            if name.decode("latin-1").lower() not in _REQUEST_SKIP
        ]
        headers.append(("Authorization", f"Bearer {self.token}"))
        lowered = {name.lower(): value for name, value in headers}
        self.seen.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "host": lowered.get("host"),
                "origin": lowered.get("origin"),
            }
        )
        url = self.upstream.rstrip("/") + scope["raw_path"].decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        # A fresh client per request: no connection state is shared between the peer's requests.
        async with httpx.AsyncClient(timeout=60) as client:
            request = client.build_request(
                scope["method"], url, headers=headers, content=bytes(body)
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                payload = f"proxy could not reach the server: {exc!r}".encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 502,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": payload})
                return
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": [
                            (name, value)
                            for name, value in response.headers.raw
                            if name.decode("latin-1").lower() not in _RESPONSE_SKIP
                        ],
                    }
                )
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                await response.aclose()


@contextmanager
def bearer_proxy(token: str, upstream: str = ""):
    """Run a BearerProxy on a free 127.0.0.1 port in a thread; yield it; stop it at the end.

    The socket is bound before the proxy is yielded, so its URL (and so the Origin a peer will
    send) is known before the real server starts; set `proxy.upstream` once that server runs.
    """
    proxy = BearerProxy(token, upstream)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    proxy.url = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(
        proxy,
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)  # outside the main thread it installs no signal handlers
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"bearer-proxy-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"bearer proxy did not start on {proxy.url}")
            time.sleep(0.02)
        yield proxy
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
