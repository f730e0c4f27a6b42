"""Who asks, as hyperbook tells ORDS: a short-lived JWT access token (RFC 9068) that hyperbook
signs for that user on every request, and the JWKS that lets ORDS (or an STS) verify it.

ORDS' JWT profiles verify RS256, RS384 or RS512 only, with an RSA key of 2048 to 4096 bits, so the
assertions ORDS receives are RS256. An Ed25519 (EdDSA) or P-256 (ES256) key is allowed only when
the assertion goes to an STS instead (ORDS_TOKEN_EXCHANGE_URL): ords_verifiable() is that rule.

The user's own VPD bearer never leaves hyperbook; only their identity does (docs/ords-adapter.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import uuid
from base64 import urlsafe_b64encode
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.core.exceptions import ImproperlyConfigured
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

JWT_TYP = "at+jwt"  # RFC 9068 §2.1
# RFC 9068's client_id: the client that asked for the token, which is hyperbook itself.
CLIENT_ID = "hyperbook"
# act.sub when no agent's delegation asks: a call of kb.answering.answer_question from inside
# hyperbook (a management command, a test, the bench). Every /mcp call names its delegation.
DIRECT_ACTOR = "hyperbook"
MAX_LIFETIME_SECONDS = 300
# What an ORDS JWT profile verifies (docs/ords-adapter.md); hyperbook signs RS256 with an RSA key.
ORDS_ALGORITHMS = ("RS256", "RS384", "RS512")
RSA_MIN_BITS, RSA_MAX_BITS = 2048, 4096
GENERATED_RSA_BITS = 3072  # 128-bit security, inside ORDS' range
# RFC 7638: the members a key's thumbprint covers, per key type.
THUMBPRINT_MEMBERS = {
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
    "EC": ("crv", "kty", "x", "y"),
}

PrivateKey = rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class SigningKey:
    kid: str
    algorithm: str  # RS256 (RSA); EdDSA (Ed25519) or ES256 (P-256) for an STS only
    public_jwk: dict
    # None for an earlier key published from its public half only.
    private_key: PrivateKey | None = field(default=None, repr=False, compare=False)
    source: str = field(default="", compare=False)  # "SETTING: path", for messages


@dataclass(frozen=True)
class SigningKeys:
    current: SigningKey
    previous: tuple[SigningKey, ...]

    def jwks(self) -> dict:
        """Public keys only: the current key, then every earlier one still listed."""
        keys, seen = [], set()
        for key in (self.current, *self.previous):
            if key.kid not in seen:
                seen.add(key.kid)
                keys.append(dict(key.public_jwk))
        return {"keys": keys}


@dataclass(frozen=True)
class Asker:
    """The user ORDS must answer as, and the agent acting for them."""

    stakeholder_id: str
    role: str
    branch_id: str | None
    actor: str  # the delegation id of the /mcp caller, or DIRECT_ACTOR


def assertion_issue(
    *,
    asker: Asker,
    issuer: str,
    audience: str,
    scope: str,
    lifetime_seconds: int,
    key: SigningKey,
    now: float | None = None,
) -> str:
    """A signed JWT access token saying `asker` asks, for `audience` only, valid briefly."""
    if key.private_key is None:
        raise ValueError(f"signing key {key.kid} has no private half")
    issued_at = int(time.time() if now is None else now)
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": asker.stakeholder_id,
        "client_id": CLIENT_ID,
        "act": {"sub": asker.actor},
        "scope": scope,
        "kb_role": asker.role,
        "kb_branch": asker.branch_id,
        "iat": issued_at,
        "exp": issued_at + lifetime_seconds,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(
        claims,
        key.private_key,
        algorithm=key.algorithm,
        headers={"typ": JWT_TYP, "kid": key.kid},
    )


def signing_keys(current_file: str, previous_files: list[str] | tuple[str, ...]) -> SigningKeys:
    """The keys named by KB_ASSERTION_SIGNING_KEY_FILE and KB_ASSERTION_PREVIOUS_KEY_FILES.

    Read once per process and set of file names: a rotation is a configuration change and a
    restart, like every other setting."""
    return _signing_keys(str(current_file or ""), tuple(str(p) for p in previous_files or ()))


@functools.lru_cache(maxsize=8)
def _signing_keys(current_file: str, previous_files: tuple[str, ...]) -> SigningKeys:
    if not current_file:
        raise ImproperlyConfigured(
            "KB_ASSERTION_SIGNING_KEY_FILE is not set (the key that signs ORDS assertions)"
        )
    current = key_from_file(current_file, setting="KB_ASSERTION_SIGNING_KEY_FILE")
    if current.private_key is None:
        raise ImproperlyConfigured("KB_ASSERTION_SIGNING_KEY_FILE must hold a private key")
    previous = tuple(
        key_from_file(path, setting="KB_ASSERTION_PREVIOUS_KEY_FILES") for path in previous_files
    )
    return SigningKeys(current=current, previous=previous)


def ords_verifiable(keys: SigningKeys) -> SigningKeys:
    """`keys`, when ORDS itself verifies the assertions (no STS between): every key its JWT
    profile can find in the JWKS must be one ORDS takes, so a wrong key stops the start, not every
    question later with invalid_token."""
    for key in (keys.current, *keys.previous):
        if key.algorithm not in ORDS_ALGORITHMS:
            raise ImproperlyConfigured(
                f"{key.source} is an {key.algorithm} key, but ORDS verifies RS256, RS384 or RS512 "
                f"only: use an RSA key of {RSA_MIN_BITS} to {RSA_MAX_BITS} bits, or set "
                f"ORDS_TOKEN_EXCHANGE_URL to an STS that accepts {key.algorithm} "
                "(docs/ords-adapter.md)"
            )
    return keys


def key_from_file(path: str, *, setting: str) -> SigningKey:
    """An RSA (2048 to 4096 bits), Ed25519 or P-256 key from a PEM file: a private key, or (an
    earlier key) a public one. The message names the setting and the path (configuration, not a
    secret), never the key."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        raise ImproperlyConfigured(f"{setting}: {path} could not be read") from None
    private_key, public_key = None, None
    try:
        private_key = serialization.load_pem_private_key(data, password=None)
        public_key = private_key.public_key()
    except (ValueError, TypeError):
        try:
            public_key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError):
            raise ImproperlyConfigured(f"{setting}: {path} is not an unencrypted PEM key") from None
    kinds = f"an RSA ({RSA_MIN_BITS} to {RSA_MAX_BITS} bits), Ed25519 or P-256 (EC) key"
    if isinstance(public_key, rsa.RSAPublicKey):
        if not RSA_MIN_BITS <= public_key.key_size <= RSA_MAX_BITS:
            # Shorter is too weak, and ORDS takes nothing longer.
            raise ImproperlyConfigured(
                f"{setting}: {path} is a {public_key.key_size}-bit RSA key; it must have "
                f"{RSA_MIN_BITS} to {RSA_MAX_BITS} bits"
            )
        algorithm, jwk = "RS256", RSAAlgorithm.to_jwk(public_key, as_dict=True)
    elif isinstance(public_key, ed25519.Ed25519PublicKey):
        algorithm, jwk = "EdDSA", OKPAlgorithm.to_jwk(public_key, as_dict=True)
    elif isinstance(public_key, ec.EllipticCurvePublicKey) and public_key.curve.name == "secp256r1":
        algorithm, jwk = "ES256", ECAlgorithm.to_jwk(public_key, as_dict=True)
    else:
        raise ImproperlyConfigured(f"{setting}: {path} must be {kinds}")
    if not isinstance(private_key, PrivateKey | None):
        # Cannot happen once its public half passed the checks above; it tells the types so.
        raise ImproperlyConfigured(f"{setting}: {path} must be {kinds}")
    kid = jwk_thumbprint(jwk)
    # The key's own members only: `use` says what it is for, and RFC 7517 §4.3 advises against
    # key_ops (which PyJWT adds) beside it.
    members = {name: jwk[name] for name in THUMBPRINT_MEMBERS[jwk["kty"]]}
    public_jwk = {**members, "kid": kid, "alg": algorithm, "use": "sig"}
    return SigningKey(
        kid=kid,
        algorithm=algorithm,
        public_jwk=public_jwk,
        private_key=private_key,
        source=f"{setting}: {path}",
    )


def jwk_thumbprint(jwk: dict) -> str:
    """RFC 7638: SHA-256 over the key's required members, so a kid names exactly one key."""
    members = THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("ascii")).digest()
    return urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def signing_key_file_generated(path: Path) -> Path:
    """For development and tests: an RSA key (what ORDS verifies) written once to `path` (mode
    0600).

    Written beside it first and linked into place, so that a process starting at the same time
    reads either no file or the whole key."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=GENERATED_RSA_BITS)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    draft = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process won; its key is the one
    finally:
        draft.unlink(missing_ok=True)
    return path
