"""django-oauth-toolkit's validator, with two changes: no code or token is kept in the clear,
and every token belongs to the delegation its consent created.

Codes and tokens are stored (and looked up) by their keyed fingerprint, the same HMAC that VPD
tokens get, so a copy of the database holds nothing an agent could present. The toolkit hashes
what it is given once more (SHA-256) for its own index; that changes nothing here."""

import hashlib
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from core.tokens import keyed_fingerprint, token_fingerprint
from registry.delegations import delegation_bind_access_token
from registry.models import TokenDelegation
from signin.enterprise import AssertionRefused, assertion_verify, enterprise_grant_create
from signin.grants import (
    GRANT_SOURCES,
    REFRESH_RACE_SECONDS,
    TokenRefusal,
    grant_bind_token_family,
    grant_for_family,
    grant_is_live,
    grant_revoke,
    token_refusal_record,
)
from signin.models import CodeApproval, RedeemedCode
from signin.resources import issuer_for, resource_url_for
from signin.server import redirect_uri_registered


def secret_fingerprint(value: str) -> str:
    """What the toolkit's tables hold for a code or token (a context of its own, apart from the
    fingerprints /mcp's gate looks tokens up by)."""
    return keyed_fingerprint(value, context="oauth:")


def _checksum(value: str) -> str:
    return hashlib.sha256(secret_fingerprint(value).encode()).hexdigest()


class LostRace(errors.InvalidGrantError):
    """Another request redeemed this code or refresh token first, while this one was under way.
    Raised while the tokens are being saved, so that this request's transaction issues none."""

    def __init__(self, refusal: TokenRefusal, delegation, **kwargs):
        super().__init__(**kwargs)
        self.refusal, self.delegation = refusal, delegation


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
            self._refuse_replayed_code(code, request)
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

    def _refuse_replayed_code(self, code, request) -> None:
        """RFC 6749 §4.1.2: a code exchanged before is refused, and the grant it produced (its
        delegation, with every token of its family) is revoked: whoever presents it again, one of
        its two users is not the agent. Audited."""
        redeemed = (
            RedeemedCode.objects.select_related("delegation")
            .filter(code_fingerprint=secret_fingerprint(code))
            .first()
        )
        if redeemed is None:
            return
        if grant_is_live(redeemed.delegation):
            grant_revoke(delegation=redeemed.delegation, reason=_("인가 코드 재사용 감지"))
        token_refusal_record(request, TokenRefusal.CODE_REPLAYED, redeemed.delegation)

    def burn_authorization_code(self, request) -> None:
        """A found code failed a later check (its PKCE verifier, its redirect URI): it is gone,
        so that a stolen code cannot be tried again with another guess, and the consent it
        carried ends with it. Audited."""
        deleted, _rows = (
            get_grant_model()
            .objects.filter(code=secret_fingerprint(request.code), application=request.client)
            .delete()
        )
        # Already gone: another request redeemed it while this one was checking, a replay.
        replayed = not deleted
        delegation = request.delegation
        if grant_is_live(delegation):
            reason = _("인가 코드 재사용 감지") if replayed else _("인가 코드 검증 실패")
            grant_revoke(delegation=delegation, reason=reason)
        refusal = TokenRefusal.CODE_REPLAYED if replayed else TokenRefusal.CODE_FAILED
        token_refusal_record(request, refusal, delegation)

    def _grant_row(self, code, request):
        """The code's row; gone (another request redeemed it meanwhile) is a refusal, not a 500."""
        grant = (
            get_grant_model()
            .objects.filter(code=secret_fingerprint(code), application=request.client)
            .first()
        )
        if grant is None:
            raise errors.InvalidGrantError(request=request)
        return grant

    def confirm_redirect_uri(self, client_id, code, redirect_uri, client, request, *args, **kwargs):
        # The code's own redirect URI, exactly (the toolkit's Grant compares with ==).
        return self._grant_row(code, request).redirect_uri_allowed(redirect_uri)

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        return redirect_uri_registered(redirect_uri, request.client)

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        if getattr(request, "code_redeemed", False):
            return  # _redeem_code deleted it, in the transaction that issued the tokens
        super().invalidate_authorization_code(client_id, secret_fingerprint(code), request)

    def get_code_challenge(self, code, request):
        return self._grant_row(code, request).code_challenge or None

    def get_code_challenge_method(self, code, request):
        return self._grant_row(code, request).code_challenge_method or None

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
        """The toolkit's check, done on one read of the row. The toolkit reads it again and, if a
        concurrent refresh has rotated it meanwhile, takes that for reuse and revokes the family,
        the winner's new token with it; here the claim in _claim_refresh_token decides the race,
        and reuse is judged on the row as first read."""
        stored = (
            get_refresh_token_model()
            .objects.filter(token_checksum=_checksum(refresh_token))
            .select_related("access_token")
            .order_by(F("revoked").desc(nulls_first=True))
            .first()
        )
        if stored is None:
            return False
        delegation = grant_for_family(stored.token_family)
        if stored.revoked is not None:
            live = grant_is_live(delegation)
            recent = timezone.now() - timedelta(seconds=REFRESH_RACE_SECONDS)
            if live and stored.revoked > recent:
                # Rotated a moment ago: the agent's own concurrent refresh lost (REFRESH_RACE_
                # SECONDS). Refused, and the grant stays.
                token_refusal_record(request, TokenRefusal.REFRESH_RACED, delegation)
            else:
                if live:
                    # A refresh token used again: one of its two holders is not the agent. The
                    # whole grant ends: the delegation and every token of its family.
                    grant_revoke(delegation=delegation, reason=_("갱신 토큰 재사용 감지"))
                token_refusal_record(request, TokenRefusal.REFRESH_REUSED, delegation)
            return False
        request.user = stored.user
        request.refresh_token = refresh_token  # what the agent sent (the row holds no token)
        request.refresh_token_instance = stored  # for the toolkit's scopes and rotation
        if stored.application_id != client.pk or not grant_is_live(delegation):
            return False
        request.delegation = delegation
        return True

    # --- an enterprise IdP's ID-JAG (SEP-990) ------------------------------------------------

    def validate_identity_assertion(self, request) -> None:
        """The ID-JAG's checks (signin.enterprise); a refusal is audited with its reason and
        answered as RFC 7523 §3.1 says, invalid_grant (invalid_scope for a scope beyond it)."""
        try:
            grant = assertion_verify(
                assertion=request.assertion,
                client_id=request.client.client_id,
                issuer=issuer_for(request),
                resource=resource_url_for(request),
                requested=(request.scope or "").split() or None,
            )
        except AssertionRefused as refused:
            kind = (
                TokenRefusal.ASSERTION_REFUSED
                if refused.verified
                else TokenRefusal.ASSERTION_INVALID
            )
            token_refusal_record(request, kind, reason=refused.description)
            error = (
                errors.InvalidScopeError
                if refused.error == "invalid_scope"
                else errors.InvalidGrantError
            )
            raise error(description=refused.description, request=request) from None
        request.enterprise_grant = grant
        request.user = grant.user
        request.scopes = grant.tools

    def _grant_enterprise(self, request) -> None:
        # In the transaction that issues the token: if issuing fails, no delegation is left over.
        request.delegation = enterprise_grant_create(
            grant=request.enterprise_grant,
            client_id=request.client.client_id,
            client_name=request.client.name,
            audience=resource_url_for(request),
        )

    # --- redeeming: one winner, in the transaction that issues the tokens ------------------------

    def save_bearer_token(self, token, request, *args, **kwargs):
        try:
            return super().save_bearer_token(token, request, *args, **kwargs)
        except LostRace as lost:
            # Recorded after the transaction that would have issued the tokens has rolled back.
            if lost.refusal == TokenRefusal.CODE_REPLAYED and grant_is_live(lost.delegation):
                grant_revoke(delegation=lost.delegation, reason=_("인가 코드 재사용 감지"))
            token_refusal_record(request, lost.refusal, lost.delegation)
            raise

    def _save_bearer_token(self, token, request, *args, **kwargs):
        # Inside the toolkit's transaction (save_bearer_token): claiming the code or the refresh
        # token is the first write, so of several requests at once exactly one claims it, and a
        # loser's LostRace rolls back everything it would have issued.
        if request.grant_type == "authorization_code":
            self._redeem_code(request)
        elif request.grant_type == "refresh_token":
            self._claim_refresh_token(request)
        elif getattr(request, "enterprise_grant", None) is not None:
            self._grant_enterprise(request)
        return super()._save_bearer_token(token, request, *args, **kwargs)

    def _redeem_code(self, request) -> None:
        fingerprint = secret_fingerprint(request.code)
        try:
            with transaction.atomic():
                RedeemedCode.objects.create(
                    code_fingerprint=fingerprint, delegation=request.delegation
                )
        except IntegrityError:
            # Two exchanges of one code: as for any replay, what it produced is revoked.
            raise LostRace(
                TokenRefusal.CODE_REPLAYED, request.delegation, request=request
            ) from None
        deleted, _rows = (
            get_grant_model().objects.filter(code=fingerprint, application=request.client).delete()
        )
        if not deleted:
            raise LostRace(TokenRefusal.CODE_REPLAYED, request.delegation, request=request)
        request.code_redeemed = True

    def _claim_refresh_token(self, request) -> None:
        """Revoke the presented refresh token if, and only if, nobody has yet: a conditional
        UPDATE, which PostgreSQL re-checks after a concurrent one commits and SQLite runs one at
        a time. The toolkit's own rotation then finds it revoked and issues the new pair."""
        rotated = request.refresh_token_instance
        claimed = (
            get_refresh_token_model()
            .objects.filter(pk=rotated.pk, revoked__isnull=True)
            .update(revoked=timezone.now(), access_token=None)
        )
        if not claimed:
            raise LostRace(TokenRefusal.REFRESH_RACED, request.delegation, request=request)
        if rotated.access_token_id is not None:
            get_access_token_model().objects.filter(pk=rotated.access_token_id).delete()

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
            fingerprint=token_fingerprint(token), source__in=GRANT_SOURCES
        ).first() or grant_for_family(refresh.token_family if refresh is not None else None)
        if grant_is_live(delegation):
            grant_revoke(delegation=delegation, reason=_("클라이언트가 토큰을 폐기함"))
