"""Enterprise-managed authorization (SEP-990): an agent presents, with the RFC 7523 jwt-bearer
grant, an Identity Assertion JWT Authorization Grant (ID-JAG) its enterprise IdP issued, and gets an
access token acting as the stakeholder the assertion's subject is linked to. No consent page: the
enterprise's IdP decided, within what its row here (EnterpriseIdp) lets it grant.

As rules: which assertion is accepted (draft-ietf-oauth-identity-assertion-authz-grant, §5.1 of
SEP-990), and the delegation it becomes. Every refusal says why, in ASCII, for the client (RFC 6749
§5.2); the token endpoint answers it as invalid_grant (RFC 7523 §3.1) and audits it."""

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from kb.models import Stakeholder
from kb.policy import query_refusal
from registry.delegations import delegation_grant
from registry.models import TokenDelegation
from signin.models import EnterpriseIdp, SeenAssertion, StakeholderLogin

ID_JAG_TYP = "oauth-id-jag+jwt"
# Asymmetric only: a shared-secret (HS*) key would let whoever verifies also forge.
ALGORITHMS = ("RS256", "ES256")
# Clocks of the IdP and this server differ a little; an expired assertion stays expired.
CLOCK_SKEW_SECONDS = 60
# An ID-JAG is short-lived (the IdP issues a new one per exchange); one valid for longer than this
# is refused, so that a captured assertion is not good for days and its replay row not kept as long.
MAX_ASSERTION_SECONDS = 900
JWKS_TIMEOUT_SECONDS = 5


class AssertionRefused(Exception):  # noqa: N818  (a refusal, as the token endpoint answers it)
    """The ID-JAG is not accepted. `verified`: whether its signature had been checked (a refusal
    of an unverified one is anyone's to cause, and is audited within a budget)."""

    def __init__(self, description: str, *, verified: bool, error: str = "invalid_grant"):
        super().__init__(description)
        self.description, self.verified, self.error = description, verified, error


@dataclass(frozen=True)
class EnterpriseGrant:
    """An accepted ID-JAG: who it is for, from which IdP, and which tools it grants."""

    idp: EnterpriseIdp
    user: object
    stakeholder: Stakeholder
    subject: str
    tools: list[str]


def _refused(description: str, *, verified: bool = True) -> AssertionRefused:
    return AssertionRefused(description, verified=verified)


_jwks_clients: dict[str, jwt.PyJWKClient] = {}


def _signing_key(idp: EnterpriseIdp, header: dict):
    """The IdP's key named by the header's kid (or its only key, if the header names none)."""
    kid = header.get("kid")
    if idp.jwks_url:
        client = _jwks_clients.get(idp.jwks_url)
        if client is None:  # one per URL, so that its key cache lasts across requests
            client = jwt.PyJWKClient(idp.jwks_url, cache_keys=True, timeout=JWKS_TIMEOUT_SECONDS)
            _jwks_clients[idp.jwks_url] = client
        try:
            keys = client.get_signing_keys()
        except jwt.PyJWKClientError:
            raise _refused("the IdP's JWKS could not be read", verified=False) from None
    else:
        try:
            keys = list(jwt.PyJWKSet.from_dict(idp.jwks or {"keys": []}).keys)
        except jwt.PyJWKSetError:
            raise _refused("the IdP has no usable JWKS configured", verified=False) from None
    matching = [key for key in keys if kid is None or key.key_id == kid]
    if len(matching) != 1:
        raise _refused("no key of the IdP's JWKS matches the assertion's kid", verified=False)
    return matching[0].key


def _resource_matches(claim, resource: str) -> bool:
    values = [claim] if isinstance(claim, str) else claim
    return isinstance(values, list) and bool(values) and all(v == resource for v in values)


def assertion_verify(
    *, assertion: str, client_id: str, issuer: str, resource: str, requested: list[str] | None
) -> EnterpriseGrant:
    """Check an ID-JAG presented by the authenticated client `client_id` to this server (`issuer`,
    for the resource `resource`), mark it used, and say what it grants. AssertionRefused if not."""
    try:
        header = jwt.get_unverified_header(assertion)
        unverified = jwt.decode(assertion, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise _refused("assertion is not a JWT", verified=False) from None
    if str(header.get("typ", "")).lower() != ID_JAG_TYP:
        raise _refused(f"assertion typ must be {ID_JAG_TYP}", verified=False)
    if header.get("alg") not in ALGORITHMS:
        raise _refused(f"assertion alg must be one of {', '.join(ALGORITHMS)}", verified=False)
    idp = EnterpriseIdp.objects.filter(issuer=str(unverified.get("iss", "")), enabled=True).first()
    if idp is None:
        raise _refused("iss is not a trusted enterprise IdP", verified=False)
    key = _signing_key(idp, header)
    try:
        claims = jwt.decode(
            assertion,
            key,
            algorithms=[header["alg"]],
            audience=issuer,
            issuer=idp.issuer,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"], "strict_aud": True},
        )
    except jwt.InvalidSignatureError:
        raise _refused("assertion signature does not verify", verified=False) from None
    except jwt.ExpiredSignatureError:
        raise _refused("assertion has expired") from None
    except jwt.InvalidAudienceError:
        raise _refused(f"aud must be {issuer}") from None
    except jwt.MissingRequiredClaimError as exc:
        raise _refused(f"assertion lacks the {exc.claim} claim") from None
    except jwt.PyJWTError as exc:
        raise _refused(f"assertion is invalid: {type(exc).__name__}") from None

    if not _resource_matches(claims.get("resource"), resource):
        raise _refused(f"resource claim must be {resource}")
    if claims.get("client_id") != client_id:
        # The client_id claim, not the client alone, binds the grant (SEP-990 §5.1): an ID-JAG
        # issued to one client is no good to another that got hold of it.
        raise _refused("client_id claim does not name the authenticated client")
    if client_id not in (idp.client_ids or []):
        raise _refused("this IdP may not grant access to this client")
    if int(claims["exp"]) > time.time() + MAX_ASSERTION_SECONDS + CLOCK_SKEW_SECONDS:
        raise _refused(f"assertion must expire within {MAX_ASSERTION_SECONDS} seconds")
    _mark_used(idp, str(claims["jti"]), int(claims["exp"]))

    subject = claims.get(idp.subject_claim)
    if not isinstance(subject, str) or not subject:
        raise _refused(f"{idp.subject_claim} is not linked to a stakeholder")
    user = get_user_model().objects.filter(username=subject, is_active=True).first()
    link = StakeholderLogin.objects.select_related("stakeholder").filter(user=user).first()
    if link is None:
        raise _refused(f"{idp.subject_claim} is not linked to a stakeholder")
    stakeholder = link.stakeholder
    if query_refusal(
        role=stakeholder.role, status=stakeholder.status, branch_id=stakeholder.branch_id
    ):
        raise _refused("the linked stakeholder may not query")
    return EnterpriseGrant(
        idp=idp,
        user=user,
        stakeholder=stakeholder,
        subject=subject,
        tools=_granted_tools(idp, claims, requested),
    )


def _mark_used(idp: EnterpriseIdp, jti: str, exp: int) -> None:
    """Every ID-JAG is exchanged once: a jti seen before (until its exp) is a replay. Marked as
    soon as the signature and claims hold, whatever follows: a captured assertion is not a retry."""
    now = timezone.now()
    expires_at = datetime.fromtimestamp(exp, tz=UTC) + timedelta(seconds=CLOCK_SKEW_SECONDS)
    SeenAssertion.objects.filter(expires_at__lt=now).delete()  # past exp, jwt.decode refuses it
    try:
        with transaction.atomic():
            SeenAssertion.objects.create(issuer=idp.issuer, jti=jti[:255], expires_at=expires_at)
    except IntegrityError:
        raise _refused("assertion was presented before (jti replayed)") from None


def _granted_tools(idp: EnterpriseIdp, claims: dict, requested: list[str] | None) -> list[str]:
    """What the IdP's row allows, narrowed by the assertion's scope claim and then by the request's
    scope. The request never widens it: the ID-JAG and policy decide, not the client."""
    allowed = list(idp.tools or [])
    scope = claims.get("scope")
    tools = scope.split() if isinstance(scope, str) and scope.strip() else allowed
    outside = [tool for tool in tools if tool not in allowed]
    if outside:
        raise _refused(f"this IdP may not grant the tool {outside[0]}")
    if requested:
        beyond = [tool for tool in requested if tool not in tools]
        if beyond:
            raise AssertionRefused(
                f"scope {beyond[0]} is not granted by the assertion",
                verified=True,
                error="invalid_scope",
            )
        tools = [tool for tool in tools if tool in requested]
    if not tools:
        raise _refused("the assertion grants no tool")
    return tools


def enterprise_grant_create(*, grant: EnterpriseGrant, client_id: str, client_name: str, audience):
    """The delegation an accepted ID-JAG becomes, like every grant's: listed on the user's agents
    page (created_by is the user it acts for), revocable there, audited as delegation.granted with
    the IdP as approver. It lives as long as its access token: there is no refresh token (SEP-990
    leaves the session's length to the IdP, which issues a new ID-JAG)."""
    expires_at = timezone.now() + timedelta(seconds=settings.OAUTH_ACCESS_TOKEN_SECONDS)
    return delegation_grant(
        stakeholder=grant.stakeholder,
        client_id=client_id,
        client_name=client_name,
        audience=audience,
        expires_at=expires_at,
        tools=grant.tools,
        granted_by=grant.user,
        source=TokenDelegation.Source.ENTERPRISE,
        approved_by_idp=grant.idp.issuer,
    )
