"""A test enterprise IdP: a key pair whose public JWKS hyperbook trusts (an EnterpriseIdp row), and
the ID-JAGs it signs, as draft-ietf-oauth-identity-assertion-authz-grant shapes them."""

import secrets
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from oauth2_provider.models import get_application_model

from signin.models import EnterpriseIdp

IDP_ISSUER = "https://idp.enterprise.example"
CLIENT_SECRET = "enterprise-agent-test-secret-8f1c"  # noqa: S105  (a throwaway test client)


class TestIdp:
    """Signs ID-JAGs with its own key (RS256, or ES256); `public_jwks` is what hyperbook holds."""

    __test__ = False

    def __init__(self, issuer: str = IDP_ISSUER, alg: str = "RS256", kid: str = "idp-key-1"):
        self.issuer, self.alg, self.kid = issuer, alg, kid
        if alg == "ES256":
            self.private_key = ec.generate_private_key(ec.SECP256R1())
            public = jwt.algorithms.ECAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True)
        else:
            self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public = jwt.algorithms.RSAAlgorithm.to_jwk(self.private_key.public_key(), as_dict=True)
        self.public_jwks = {"keys": [{**public, "kid": kid, "alg": alg, "use": "sig"}]}

    def register(self, *, client_ids: list[str], tools: list[str], **fields) -> EnterpriseIdp:
        return EnterpriseIdp.objects.create(
            name="Test enterprise IdP",
            issuer=self.issuer,
            jwks=self.public_jwks,
            client_ids=client_ids,
            tools=tools,
            **fields,
        )

    def id_jag(
        self,
        *,
        audience: str,
        resource: str,
        client_id: str,
        subject: str,
        lifetime: int = 300,
        typ: str = "oauth-id-jag+jwt",
        key=None,
        **claims,
    ) -> str:
        now = int(time.time())
        payload = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "resource": resource,
            "client_id": client_id,
            "jti": secrets.token_urlsafe(16),
            "iat": now,
            "exp": now + lifetime,
            **claims,
        }
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(
            payload,
            key or self.private_key,
            algorithm=self.alg,
            headers={"typ": typ, "kid": self.kid},
        )


def confidential_client(name: str = "Enterprise agent"):
    """A confidential client, as the ID-JAG flow requires; the toolkit hashes the secret."""
    Application = get_application_model()
    return Application.objects.create(
        name=name,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=CLIENT_SECRET,
        redirect_uris="",
    )
