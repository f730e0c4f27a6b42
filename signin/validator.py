"""django-oauth-toolkit's validator, with two changes: no code or token is kept in the clear,
and every token belongs to the delegation its consent created.

Codes and tokens are stored (and looked up) by their keyed fingerprint, the same HMAC that VPD
tokens get, so a copy of the database holds nothing an agent could present. The toolkit hashes
what it is given once more (SHA-256) for its own index; that changes nothing here."""

import hashlib

from django.utils.translation import gettext as _
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from core.tokens import keyed_fingerprint, token_fingerprint
from registry.delegations import delegation_bind_access_token
from registry.models import TokenDelegation
from signin.grants import (
    grant_bind_token_family,
    grant_for_family,
    grant_is_live,
    grant_revoke,
)
from signin.models import CodeApproval
from signin.resources import resource_url_for


def secret_fingerprint(value: str) -> str:
    """What the toolkit's tables hold for a code or token (a context of its own, apart from the
    fingerprints /mcp's gate looks tokens up by)."""
    return keyed_fingerprint(value, context="oauth:")


def _checksum(value: str) -> str:
    return hashlib.sha256(secret_fingerprint(value).encode()).hexdigest()


class DelegationValidator(OAuth2Validator):
    # --- authorization codes: kept as fingerprints ---------------------------------------------

    def _create_authorization_code(self, request, code, expires=None):
        grant = super()._create_authorization_code(
            request, {**code, "code": secret_fingerprint(code["code"])}, expires
        )
        delegation_id = getattr(request, "delegation_id", None)
        if delegation_id is None:  # only the consent view issues codes, and it always says which
            raise errors.ServerError(request=request)
        CodeApproval.objects.create(grant=grant, delegation_id=delegation_id)
        return grant

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        if not super().validate_code(client_id, secret_fingerprint(code), client, request):
            return False
        approval = (
            CodeApproval.objects.select_related("delegation")
            .filter(grant__code=secret_fingerprint(code), grant__application=client)
            .first()
        )
        if approval is None or not grant_is_live(approval.delegation):
            return False
        request.delegation = approval.delegation
        return True

    def confirm_redirect_uri(self, client_id, code, redirect_uri, client, *args, **kwargs):
        return super().confirm_redirect_uri(
            client_id, secret_fingerprint(code), redirect_uri, client, *args, **kwargs
        )

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        return super().invalidate_authorization_code(client_id, secret_fingerprint(code), request)

    def get_code_challenge(self, code, request):
        return super().get_code_challenge(secret_fingerprint(code), request)

    def get_code_challenge_method(self, code, request):
        return super().get_code_challenge_method(secret_fingerprint(code), request)

    def get_authorization_code_scopes(self, client_id, code, redirect_uri, request):
        return super().get_authorization_code_scopes(
            client_id, secret_fingerprint(code), redirect_uri, request
        )

    def get_authorization_code_nonce(self, client_id, code, redirect_uri, request):
        return super().get_authorization_code_nonce(
            client_id, secret_fingerprint(code), redirect_uri, request
        )

    # --- access and refresh tokens: kept as fingerprints, bound to the delegation -------------

    def _set_token_value(self, token_instance, raw_token):
        super()._set_token_value(token_instance, secret_fingerprint(raw_token))

    def _load_access_token(self, token):
        return super()._load_access_token(secret_fingerprint(token))

    def _check_and_set_request_resource(self, request):
        """RFC 8707: this server issues tokens for one resource, /mcp. A token request may name
        it again, or nothing (the code's resource holds); anything else is refused."""
        resource = getattr(request, "resource", None)
        named = [resource] if isinstance(resource, str) and resource else list(resource or [])
        body_values = [
            v for k, v in (getattr(request, "decoded_body", None) or []) if k == "resource"
        ]
        named = body_values or named
        ours = resource_url_for(request)
        if any(value != ours for value in named):
            raise errors.CustomOAuth2Error(
                error="invalid_target",
                # RFC 6749 §5.2: an error description is ASCII, for the client, not a person.
                description=f"resource must be {ours}",
                request=request,
            )
        request.resource = [ours]

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        access_token = super()._create_access_token(
            expires, request, token, source_refresh_token=source_refresh_token
        )
        if source_refresh_token is not None:
            delegation = grant_for_family(source_refresh_token.token_family)
        else:
            delegation = getattr(request, "delegation", None)
        if not grant_is_live(delegation):
            raise errors.InvalidGrantError(request=request)
        delegation_bind_access_token(
            delegation=delegation,
            access_token=token["access_token"],
            expires=expires,
            refreshed=source_refresh_token is not None,
        )
        return access_token

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous):
        refresh_token = super()._create_refresh_token(
            request, refresh_token_code, access_token, previous
        )
        if previous is None:
            grant_bind_token_family(
                delegation=request.delegation, family=refresh_token.token_family
            )
        return refresh_token

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs):
        stored = (
            get_refresh_token_model()
            .objects.filter(token_checksum=_checksum(refresh_token))
            .order_by("-revoked")
            .values_list("token_family", "revoked")
            .first()
        )
        delegation = grant_for_family(stored[0]) if stored else None
        valid = super().validate_refresh_token(
            secret_fingerprint(refresh_token), client, request, *args, **kwargs
        )
        request.refresh_token = refresh_token  # the toolkit kept what it was given
        if not valid:
            if stored and stored[1] is not None and grant_is_live(delegation):
                # A refresh token used twice: one of the two holders is not the agent. The whole
                # grant ends (the toolkit has revoked the family's tokens too).
                grant_revoke(delegation=delegation, reason=_("갱신 토큰 재사용 감지"))
            return False
        if not grant_is_live(delegation):
            return False
        request.delegation = delegation
        return True

    def revoke_token(self, token, token_type_hint, request, *args, **kwargs):
        """RFC 7009: revoking either token of a grant ends the grant. A token that is not this
        client's is left alone (and, as the RFC asks, not reported)."""
        checksum = _checksum(token)
        access = (
            get_access_token_model()
            .objects.filter(token_checksum=checksum, application=request.client)
            .first()
        )
        refresh = (
            get_refresh_token_model()
            .objects.filter(token_checksum=checksum, application=request.client)
            .first()
        )
        if access is None and refresh is None:
            return
        super().revoke_token(secret_fingerprint(token), token_type_hint, request, *args, **kwargs)
        delegation = TokenDelegation.objects.filter(
            fingerprint=token_fingerprint(token), source=TokenDelegation.Source.SIGNED_IN
        ).first() or grant_for_family(refresh.token_family if refresh is not None else None)
        if grant_is_live(delegation):
            grant_revoke(delegation=delegation, reason=_("클라이언트가 토큰을 폐기함"))
