"""Issuing and checking REST API tokens; DRF authentication with `Authorization: Token <key>`."""

import secrets
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions

from audit.models import AuditEvent
from audit.services import audit_change
from core.models import ApiToken
from core.tokens import token_fingerprint

API_TOKEN_PREFIX = "hbapi_"  # noqa: S105  (a public marker, not a secret)


def api_token_issue(*, user, label: str, expires_at: datetime, actor=None) -> tuple[ApiToken, str]:
    """A new token for `user`, returned once. The token's user never changes after this."""
    token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        record = ApiToken.objects.create(
            user=user,
            label=label,
            display_prefix=token[: len(API_TOKEN_PREFIX) + 4],
            fingerprint=token_fingerprint(token),
            expires_at=expires_at,
        )
        audit_change(
            action=AuditEvent.Action.API_TOKEN_ISSUED,
            actor=actor,
            target=f"api_token:{record.pk}",
            before=None,
            after=_api_token_snapshot(record),
        )
    return record, token


def api_token_revoke(*, token: ApiToken, actor=None) -> bool:
    """Revoke once; returns whether this call revoked it."""
    with transaction.atomic():
        before = _api_token_snapshot(token)
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        token.refresh_from_db()
        if revoked:
            audit_change(
                action=AuditEvent.Action.API_TOKEN_REVOKED,
                actor=actor,
                target=f"api_token:{token.pk}",
                before=before,
                after=_api_token_snapshot(token),
            )
    return bool(revoked)


def _api_token_snapshot(token: ApiToken) -> dict:
    return {
        "user": token.user.get_username(),
        "label": token.label,
        "display_prefix": token.display_prefix,
        "fingerprint": token.fingerprint,
        "expires_at": token.expires_at.isoformat(),
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header.")
        try:
            token = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        record = (
            ApiToken.objects.select_related("user")
            .filter(fingerprint=token_fingerprint(token), revoked_at__isnull=True)
            .first()
        )
        if record is None or record.expires_at <= timezone.now() or not record.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or expired token.")
        return record.user, record

    def authenticate_header(self, request):
        return self.keyword
