"""An ORDS and an STS stand-in on loopback that verify hyperbook's assertions as ORDS' JWT profile
does (ORDS_SECURITY.CREATE_JWT_PROFILE; docs/ords-adapter.md): alg RS256, RS384 or RS512 only, the
key found by kid in the JWKS fetched over HTTP from the profile's JWKS URL and an RSA key of 2048 to
4096 bits, then the signature, iss and aud equal to the profile's, and exp and iat within its
allowed skew and age. Beyond ORDS' own checks they hold hyperbook to typ at+jwt and a jti never
seen before. The STS stand-in takes EdDSA and ES256 as well, as an STS may.

Both record every header and body they receive; ORDS answers in the reply shape kb/ords.py
assumes, with the rows of the asserted sub.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from kb.catalogue import TOOL_NAME
from tests.kb.test_selectai_provider import LoopbackServer, Recorded, Reply, json_reply

ISSUER = "https://kb.hyperbook.test"
AUDIENCE = "https://ords.kb.test"
STS_CLIENT_ID = "hyperbook-at-sts"
STS_CLIENT_SECRET = "sts-client-secret-0123456789"  # noqa: S105  (the stand-in's own)
EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TYPE = "urn:ietf:params:oauth:token-type:access_token"
# What an ORDS JWT profile verifies, and what the STS stand-in takes besides.
ORDS_ALGORITHMS = ("RS256", "RS384", "RS512")
STS_ALGORITHMS = (*ORDS_ALGORITHMS, "EdDSA", "ES256")
RSA_BITS = range(2048, 4096 + 1)


class Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class AssertionVerifier:
    """ORDS' side of the JWT profile: what CREATE_JWT_PROFILE registered (issuer, audience, JWKS
    URL, allowed skew and age) and the algorithms ORDS verifies."""

    jwks_url: str = ""
    issuer: str = ISSUER
    audience: str = AUDIENCE
    allowed_skew: int = 5  # p_allowed_skew: seconds of clock difference tolerated on exp and iat
    allowed_age: int = 60  # p_allowed_age: the oldest iat taken, whatever exp says
    algorithms: tuple[str, ...] = ORDS_ALGORITHMS
    clock_offset: float = 0.0  # seconds this verifier's clock runs ahead of hyperbook's
    keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    seen_jti: set[str] = field(default_factory=set)
    jwks_fetches: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verify(self, token: str) -> dict:
        """The verified claims, or Refused(reason) for any fault."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise Refused("malformed") from None
        if header.get("typ") != "at+jwt":
            raise Refused("typ")
        algorithm = header.get("alg")
        # Before any key is looked at: neither "none" nor an HMAC keyed with a public key.
        if algorithm not in self.algorithms:
            raise Refused("alg")
        key = self._key(header.get("kid"))
        if key is None:
            raise Refused("unknown_kid")
        if algorithm != key.algorithm_name:  # the JWK's alg (RS256 when it names none) binds
            raise Refused("alg")
        if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size not in RSA_BITS:
            raise Refused("key_size")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                options={
                    "require": ["iss", "aud", "sub", "exp", "iat", "jti"],
                    # Checked below on this verifier's own clock, with the profile's skew and age.
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise Refused("audience") from None
        except jwt.InvalidIssuerError:
            raise Refused("issuer") from None
        except jwt.InvalidSignatureError:
            raise Refused("signature") from None
        except jwt.InvalidTokenError as exc:
            raise Refused(f"invalid:{type(exc).__name__}") from None
        now = time.time() + self.clock_offset
        if claims["exp"] + self.allowed_skew <= now:
            raise Refused("expired")
        if claims["iat"] - self.allowed_skew > now:
            raise Refused("issued_in_future")
        if now - claims["iat"] > self.allowed_age + self.allowed_skew:
            raise Refused("too_old")
        with self.lock:
            if claims["jti"] in self.seen_jti:
                raise Refused("replayed")
            self.seen_jti.add(claims["jti"])
        return claims

    def _key(self, kid) -> jwt.PyJWK | None:
        if not isinstance(kid, str):
            return None
        if kid not in self.keys:  # a new kid: fetch the JWKS again, as ORDS does after a rotation
            self.refresh()
        return self.keys.get(kid)

    def refresh(self) -> None:
        response = httpx.get(self.jwks_url, timeout=10, trust_env=False)
        response.raise_for_status()
        self.jwks_fetches += 1
        self.keys = {jwk["kid"]: jwt.PyJWK(jwk) for jwk in response.json()["keys"]}


@dataclass
class OrdsStandIn:
    verifier: AssertionVerifier
    rows_for: Callable[[str], list[dict]]
    sts_tokens: dict[str, str] = field(default_factory=dict)  # STS-issued token -> its sub
    accepted: list[dict] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    server: LoopbackServer | None = None
    url: str = ""

    @property
    def received(self) -> list[Recorded]:
        return self.server.requests

    def respond(self, request: Recorded) -> Reply:
        authorization = request.headers.get("Authorization", "")
        if not authorization.startswith("Bearer "):
            return self._refuse("no_bearer")
        token = authorization.removeprefix("Bearer ")
        if token in self.sts_tokens:
            claims = {"sub": self.sts_tokens[token], "scope": TOOL_NAME, "via": "sts"}
        else:
            try:
                claims = self.verifier.verify(token)
            except Refused as refused:
                return self._refuse(refused.reason)
        if TOOL_NAME not in str(claims.get("scope", "")).split():
            self.refusals.append("scope")
            return json_reply({"code": "Forbidden"}, status=403)
        self.accepted.append(claims)
        sub = claims["sub"]
        return json_reply(
            {"items": self.rows_for(sub), "hasMore": False, "summary": f"rows for {sub}"}
        )

    def _refuse(self, reason: str) -> Reply:
        self.refusals.append(reason)
        status, headers, body = json_reply({"code": "Unauthorized"}, status=401)
        return status, {**headers, "WWW-Authenticate": 'Bearer error="invalid_token"'}, body

    def recorded_text(self) -> str:
        """Every header and body ORDS received, as one text to search."""
        return "\n".join(
            f"{r.method} {r.path}\n{r.headers!r}\n{r.body.decode('utf-8', 'replace')}"
            for r in self.received
        )


@dataclass
class StsStandIn:
    """An RFC 8693 token endpoint that ORDS trusts: it verifies hyperbook's assertion and issues a
    token for ORDS (opaque here) that the ORDS stand-in accepts as that sub."""

    verifier: AssertionVerifier
    ords: OrdsStandIn
    expires_in: int = 300
    refuse_with: int | None = None
    issued: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    server: LoopbackServer | None = None
    url: str = ""

    @property
    def received(self) -> list[Recorded]:
        return self.server.requests

    def respond(self, request: Recorded) -> Reply:
        if self.refuse_with is not None:
            return json_reply({"error": "invalid_grant"}, status=self.refuse_with)
        expected_basic = base64.b64encode(f"{STS_CLIENT_ID}:{STS_CLIENT_SECRET}".encode()).decode()
        if request.headers.get("Authorization") != f"Basic {expected_basic}":
            return self._problem("client_authentication", 401)
        if not request.headers.get("Content-Type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            return self._problem("content_type", 400)
        form = {k: v[0] for k, v in parse_qs(request.body.decode(), strict_parsing=True).items()}
        expected = {
            "grant_type": EXCHANGE_GRANT,
            "subject_token_type": JWT_TYPE,
            "requested_token_type": ACCESS_TYPE,
            "audience": self.verifier.audience,
            "resource": self.ords.url,
            "scope": TOOL_NAME,
        }
        for name, value in expected.items():
            if form.get(name) != value:
                return self._problem(f"form:{name}", 400)
        try:
            claims = self.verifier.verify(form.get("subject_token", ""))
        except Refused as refused:
            return self._problem(f"subject_token:{refused.reason}", 400)
        token = f"sts-for-ords-{uuid.uuid4().hex}"
        self.issued.append(token)
        self.ords.sts_tokens[token] = claims["sub"]
        return json_reply(
            {
                "access_token": token,
                "issued_token_type": ACCESS_TYPE,
                "token_type": "Bearer",
                "expires_in": self.expires_in,
            }
        )

    def _problem(self, what: str, status: int) -> Reply:
        self.problems.append(what)
        return json_reply({"error": "invalid_request"}, status=status)


def started(stand_in, stack) -> str:
    """Run `stand_in` (an OrdsStandIn or StsStandIn) on loopback until `stack` closes."""
    stand_in.server = LoopbackServer(respond=stand_in.respond)
    base = stack.enter_context(stand_in.server.running())
    stand_in.url = f"{base}/ords/kb/select_ai/" if isinstance(stand_in, OrdsStandIn) else base
    return stand_in.url


def jwks_served(jwks: Callable[[], dict], stack) -> str:
    """A loopback URL serving `jwks()` (for the in-process tests; the end-to-end ones fetch the
    live server's /.well-known/jwks.json)."""
    server = LoopbackServer(respond=lambda request: json_reply(jwks()))
    return stack.enter_context(server.running()) + "/.well-known/jwks.json"
