"""The company's OpenID provider for the single sign-on tests: tests/peers/oidc_idp.mjs (the npm
package oidc-provider) run with the pinned Node, on a loopback port."""

import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.peers.node import PEERS_DIR, peer_tools

SCRIPT = PEERS_DIR / "oidc_idp.mjs"


class RunningIdp:
    __test__ = False

    def __init__(self, issuer: str, output: Path):
        self.issuer, self.output = issuer, output

    def issued_tokens(self) -> list[str]:
        """Every access and ID token the provider's token endpoint handed out so far."""
        tokens = []
        for line in self.output.read_text().splitlines():
            if line.startswith("issued "):
                tokens.extend(token for token in line.split()[1:] if token != "-")
        return tokens


@contextmanager
def company_idp(folder: Path, *, port: int, client: dict, accounts: dict):
    """Run the provider until the block ends; yield a RunningIdp."""
    tools = peer_tools(folder / "idp-home")
    output = folder / "idp.out"
    config = {"port": port, "client": client, "accounts": accounts}
    env = {**tools.env, "IDP_CONFIG": json.dumps(config)}
    with open(output, "wb") as out:
        process = subprocess.Popen(
            [str(tools.node), str(SCRIPT)], cwd=PEERS_DIR, env=env, stdout=out, stderr=out
        )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the test OpenID provider exited:\n{output.read_text()}")
            try:
                discovery = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=2)
                if discovery.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test OpenID provider did not start:\n{output.read_text()}")
            time.sleep(0.2)
        yield RunningIdp(issuer, output)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
