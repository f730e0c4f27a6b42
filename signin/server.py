"""The OAuth server the toolkit runs for hyperbook: oauthlib's endpoints with only the grants this
server offers, and the protocol rules it holds every request to (PKCE's form, exact redirect
URIs). The toolkit's views build it from OAUTH2_PROVIDER["OAUTH2_SERVER_CLASS"].

oauthlib's stock Server answers every grant it knows (password, client credentials, the device
flow), and sends a grant type it does not know to the authorization-code handler, which
authenticates the client before it refuses. Here a grant type is refused before anything else is
read: no client, user, password, code or token is looked at for it."""

import json
import re

from oauth2_provider.oauth2_backends import OAuthLibCore
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.endpoints import (
    AuthorizationEndpoint,
    IntrospectEndpoint,
    ResourceEndpoint,
    RevocationEndpoint,
    TokenEndpoint,
)
from oauthlib.oauth2.rfc6749.grant_types import AuthorizationCodeGrant, RefreshTokenGrant
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase
from oauthlib.oauth2.rfc6749.tokens import BearerToken

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"  # RFC 7523
ID_JAG_GRANT_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"  # SEP-990's metadata name

# The grant types hyperbook offers, in the one place they are listed. A grant is answered only if
# it is listed here and TokenServer has a handler for it; the metadata advertises the same
# (offered_grants). The JWT bearer grant carries an enterprise IdP's ID-JAG (SEP-990, IdJagGrant).
ACCEPTED_GRANTS = ("authorization_code", "refresh_token", JWT_BEARER_GRANT)

# Parameters a token request carries at most once (RFC 6749 §3.2: "Request and response
# parameters MUST NOT be included more than once"); `resource` may repeat (RFC 8707).
SINGLE_VALUED = (
    "grant_type",
    "code",
    "code_verifier",
    "redirect_uri",
    "client_id",
    "client_secret",
    "refresh_token",
    "scope",
    "assertion",
)

# RFC 7636 §4.1: code_verifier = 43*128unreserved; §4.2: the challenge of S256 is its
# BASE64URL-encoded SHA-256, and a challenge is held to the same form.
PKCE_VALUE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")


def pkce_value_valid(value: str | None) -> bool:
    return isinstance(value, str) and PKCE_VALUE.fullmatch(value) is not None


# --- redirect URIs ------------------------------------------------------------------------------

_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)", re.S)
_AUTHORITY = re.compile(r"(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>[0-9]*))?")


def _loopback_hosts() -> tuple[str, ...]:
    # RFC 8252 §7.3: loopback IP literals; "localhost" only as the toolkit's setting allows.
    hosts = ("127.0.0.1", "[::1]")
    return (*hosts, "localhost") if oauth2_settings.ALLOW_LOCALHOST_LOOPBACK else hosts


def redirect_uri_matches(uri: str, registered: str) -> bool:
    """RFC 9700 §4.1.1: the URI the request names is the registered one, character for character
    (scheme, host, port, path, query). One exception, RFC 8252 §7.3: for a registered
    http://127.0.0.1, http://[::1] (or http://localhost) URI, a native client may name any port,
    since it listens on whichever one its system gave it; everything else stays exact.

    The toolkit's own match is looser (extra query parameters, a user part, the host's case and
    a fragment pass), so it is not used."""
    if uri == registered:
        return True
    asked, allowed = _URI.fullmatch(uri), _URI.fullmatch(registered)
    if asked is None or allowed is None or asked["rest"] != allowed["rest"]:
        return False
    if allowed["scheme"] != "http" or asked["scheme"] != "http":
        return False
    registered_authority = _AUTHORITY.fullmatch(allowed["authority"])
    asked_authority = _AUTHORITY.fullmatch(asked["authority"])
    if registered_authority is None or asked_authority is None:
        return False
    host = registered_authority["host"]
    port = asked_authority["port"]
    return (
        host in _loopback_hosts()
        and asked_authority["host"] == host
        and (port is None or 1 <= len(port) <= 5)
    )


def redirect_uri_registered(uri: str, client) -> bool:
    return any(redirect_uri_matches(uri, registered) for registered in client.redirect_uris.split())


# --- the grants ---------------------------------------------------------------------------------


class CodeGrant(AuthorizationCodeGrant):
    """The authorization code grant, S256 only, and a code good for one try: once the code is
    found, any later refusal (a wrong or malformed verifier, another redirect URI) ends it, so a
    stolen code cannot be tried against guessed verifiers."""

    # A class attribute of oauthlib's grant that its typeshed stubs leave out.
    _code_challenge_methods = {
        "S256": AuthorizationCodeGrant._code_challenge_methods["S256"]  # type: ignore[attr-defined]
    }

    def validate_code_challenge(self, challenge, challenge_method, verifier):
        if not pkce_value_valid(verifier):
            return False
        return super().validate_code_challenge(challenge, challenge_method, verifier)

    def validate_token_request(self, request):
        try:
            super().validate_token_request(request)
        except errors.OAuth2Error:
            if getattr(request, "delegation", None) is not None:  # set once the code was found
                self.request_validator.burn_authorization_code(request)
            raise


class IdJagGrant(GrantTypeBase):
    """RFC 7523 §2.1, the JWT bearer grant, for one kind of JWT: an Identity Assertion JWT
    Authorization Grant (ID-JAG) from a trusted enterprise IdP (SEP-990; the checks are
    signin.enterprise's). Only a confidential client that authenticates may present one (the
    draft's §9.1 SHOULD, as the MCP SDK holds it): an ID-JAG alone is a bearer credential.

    No refresh token: SEP-990 leaves a session's length to the IdP, which issues a new ID-JAG."""

    def create_token_response(self, request, token_handler):
        headers = self._get_default_headers()
        try:
            self.validate_token_request(request)
        except errors.OAuth2Error as e:
            headers.update(e.headers)
            return headers, e.json, e.status_code
        token = token_handler.create_token(request, refresh_token=False)
        self.request_validator.save_token(token, request)
        return headers, json.dumps(token), 200

    def validate_token_request(self, request):
        if not getattr(request, "assertion", None):
            raise errors.InvalidRequestError(
                description="Missing assertion parameter.", request=request
            )
        if not self.request_validator.authenticate_client(request):
            raise errors.InvalidClientError(request=request)
        if request.client.client_type != "confidential" or not request.client.client_secret:
            raise errors.UnauthorizedClientError(
                description="The JWT bearer grant requires a confidential client.",
                request=request,
            )
        request.client_id = request.client.client_id
        # Checks the ID-JAG, and sets the user, the delegation's terms and the granted scopes.
        self.request_validator.validate_identity_assertion(request)


class TokenServer(
    AuthorizationEndpoint, IntrospectEndpoint, TokenEndpoint, ResourceEndpoint, RevocationEndpoint
):
    """oauthlib's Server with hyperbook's grants only (see ACCEPTED_GRANTS)."""

    # The grant types this server has a handler for; ACCEPTED_GRANTS decides which are answered.
    handled_grants = ("authorization_code", "refresh_token", JWT_BEARER_GRANT)

    def __init__(
        self,
        request_validator,
        token_expires_in=None,
        token_generator=None,
        refresh_token_generator=None,
        **kwargs,
    ):
        self.auth_grant = CodeGrant(request_validator)
        self.refresh_grant = RefreshTokenGrant(request_validator)
        self.id_jag_grant = IdJagGrant(request_validator)
        self.bearer = BearerToken(
            request_validator, token_generator, token_expires_in, refresh_token_generator
        )
        AuthorizationEndpoint.__init__(
            self,
            default_response_type="code",
            response_types={"code": self.auth_grant},
            default_token_type=self.bearer,
        )
        handlers = {
            "authorization_code": self.auth_grant,
            "refresh_token": self.refresh_grant,
            JWT_BEARER_GRANT: self.id_jag_grant,
        }
        TokenEndpoint.__init__(
            self,
            default_grant_type=None,
            grant_types={n: handlers[n] for n in ACCEPTED_GRANTS if n in self.handled_grants},
            default_token_type=self.bearer,
        )
        ResourceEndpoint.__init__(
            self,
            default_token="Bearer",  # noqa: S106  (a token type's name)
            token_types={"Bearer": self.bearer},
        )
        RevocationEndpoint.__init__(self, request_validator)
        IntrospectEndpoint.__init__(self, request_validator)

    def validate_token_request(self, request):
        """Before any handler runs (and so before any client, code, token or password is read):
        no parameter may repeat, and the grant type must be one this server offers."""
        super().validate_token_request(request)  # POST, and nothing in the query string
        _refuse_nul(request)
        repeated = sorted(set(request.duplicate_params) & set(SINGLE_VALUED))
        if repeated:
            raise errors.InvalidRequestError(
                description=f"Repeated parameter: {repeated[0]}.", request=request
            )
        if not request.grant_type:
            raise errors.InvalidRequestError(
                description="Missing grant_type parameter.", request=request
            )
        if request.grant_type not in self.grant_types:
            # Imported here: the validator's module imports the models, this one is imported
            # by the settings' consumers before the apps are ready.
            from signin.grants import TokenRefusal, token_refusal_record

            token_refusal_record(request, TokenRefusal.UNSUPPORTED_GRANT)
            raise errors.UnsupportedGrantTypeError(request=request)

    def validate_revocation_request(self, request):
        _refuse_nul(request)
        super().validate_revocation_request(request)


def _refuse_nul(request) -> None:
    """No OAuth parameter holds a NUL (RFC 6749 Appendix A: printable ASCII, or Unicode text),
    and PostgreSQL cannot even look one up: refused before any client is."""
    if any("\x00" in str(value) for _name, value in request.decoded_body or []):
        raise errors.InvalidRequestError(
            description="A parameter holds a NUL character.", request=request
        )


def offered_grants() -> list[str]:
    """The grant types the token endpoint answers, in ACCEPTED_GRANTS' order (for the metadata)."""
    return [name for name in ACCEPTED_GRANTS if name in TokenServer.handled_grants]


class TokenBackend(OAuthLibCore):
    """The toolkit's glue, handing oauthlib every value of a repeated parameter (the toolkit keeps
    the last one only), so that the server can refuse a repeated one instead of guessing."""

    def extract_body(self, request):
        return [(key, value) for key, values in request.POST.lists() for value in values]
