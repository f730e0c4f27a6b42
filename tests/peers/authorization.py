"""The conformance suite's authorization-server scenarios (0.2 pre-release), run without a browser.

`conformance authorization` has two scenarios, run in this order (the second needs the first's
result, so they are always run together here):

- authorization-server-metadata-endpoint: GETs, in order, until one answers 200,
  `{origin}/.well-known/oauth-authorization-server{path}` (RFC 8414), then
  `{origin}/.well-known/openid-configuration{path}` and
  `{origin}{path}/.well-known/openid-configuration`, where origin and path are the issuer's. It
  checks Content-Type application/json; non-empty `authorization_endpoint` and `token_endpoint`;
  "code" in `response_types_supported`; "S256" in `code_challenge_methods_supported`; `issuer`
  equal to the issuer URL as given (string equality: a trailing slash counts). A second check,
  authorization-server-metadata-cimd, is a WARNING unless `client_id_metadata_document_supported`
  is true.
- authorization-code-grant: skipped without a client id; it registers no client (no DCR, no CIMD):
  the client must exist already, with `http://127.0.0.1:<port>/callback` as a redirect URI. It
  starts a callback server on that port, prints the authorization URL (response_type=code,
  client_id, state, redirect_uri, code_challenge with S256, and `resource` when given) and waits up
  to five minutes for the callback; it opens no browser. Someone must open the URL, sign in and
  consent: here the caller's `authorize` does that headlessly and returns the URL the authorization
  server redirected to, and this module delivers it to the callback. The callback must carry
  exactly one `state` (equal to the one sent) and one non-empty `code`, no `error`, and an `iss`,
  if any, equal to the metadata's issuer. The token request is a form POST of grant_type, code,
  redirect_uri, code_verifier (and `resource` when given) to `token_endpoint`, authenticated as
  `none` (client_id in the body) when no secret is given or the metadata lists "none" in
  `token_endpoint_auth_methods_supported`, else client_secret_post, else client_secret_basic (the
  default when that list is absent). The answer must be 200, application/json, with `Cache-Control:
  no-store`, and carry string `access_token` and `token_type`.
"""

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.live import free_port
from tests.peers.node import PEERS_DIR, PeerTools

SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")
_RESULT_DIR = re.compile(
    r"authorization-server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z"
)
_URL_PROMPT = "Access the following URL in your browser"


def callback_redirect_uri(port: int) -> str:
    """The redirect URI the suite uses, which the client must have registered."""
    return f"http://127.0.0.1:{port}/callback"


@dataclass
class AuthorizationRun:
    returncode: int
    output: str
    checks: dict[str, list[dict]]  # scenario -> its checks, as the suite wrote them
    authorization_request: str | None  # the URL the suite asked a browser to open, if it did


def run_authorization_scenarios(
    peers: PeerTools,
    issuer: str,
    output_dir: Path,
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    resource: str | None = None,
    authorize: Callable[[str], str] | None = None,
    port: int | None = None,
    timeout: float = 120,
) -> AuthorizationRun:
    """Run the authorization scenarios against `issuer`; return their checks.

    `authorize(url)` gets the authorization URL, signs in and consents as a browser would (an
    httpx client through the login and consent forms, or Playwright), and returns the URL the
    authorization server redirected to (its Location, not followed). Give it with `client_id`,
    whose client has `callback_redirect_uri(port)` registered; without a client id the grant is
    skipped. The settings go in a file, not on the command line, so a client secret is not in
    the process list.
    """
    if (client_id is None) != (authorize is None):
        raise ValueError("client_id and authorize go together: the grant needs both")
    port = port or free_port()
    output_dir.mkdir(parents=True, exist_ok=True)
    # The port goes on the command line: the CLI's own default for --port (3000) would override
    # one given in the file.
    settings = {"url": issuer}
    optional = {"clientId": client_id, "clientSecret": client_secret, "resource": resource}
    settings.update({key: value for key, value in optional.items() if value is not None})
    settings_file = output_dir / "authorization-settings.json"
    settings_file.write_text(json.dumps(settings))
    command = peers.conformance_next(
        "authorization",
        "--file",
        str(settings_file),
        "--port",
        str(port),
        "--output-dir",
        str(output_dir),
    )
    process = subprocess.Popen(
        command,
        cwd=PEERS_DIR,
        env=peers.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    prompted = threading.Event()
    request: list[str] = []

    def read_output():
        for line in process.stdout:
            lines.append(line)
            if len(lines) > 1 and _URL_PROMPT in lines[-2] and not request:
                request.append(line.strip())
                prompted.set()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + timeout
        if authorize is not None:
            while not prompted.wait(0.1):
                if process.poll() is not None or time.monotonic() > deadline:
                    break
            if request:
                _deliver_callback(authorize(request[0]), port, deadline)
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        reader.join(timeout=10)
    checks = {}
    for path in output_dir.glob("authorization-server-*/checks.json"):
        match = _RESULT_DIR.fullmatch(path.parent.name)
        if match:
            checks[match["scenario"]] = json.loads(path.read_text())
    return AuthorizationRun(
        returncode=process.returncode,
        output="".join(lines),
        checks=checks,
        authorization_request=request[0] if request else None,
    )


def _deliver_callback(redirect: str, port: int, deadline: float) -> None:
    """GET the authorization server's redirect on the suite's callback server, as a browser would.

    Only a redirect to the suite's own callback is followed: anything else is the authorization
    server's error page or a redirect elsewhere, which the caller should see as such."""
    if not redirect.startswith(callback_redirect_uri(port)):
        raise AssertionError(f"the authorization server redirected elsewhere: {redirect}")
    while True:  # the suite prints the URL before its callback server has finished binding
        try:
            httpx.get(redirect, timeout=10)
            return
        except httpx.ConnectError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
