"""Issuing and revoking REST API tokens, each recorded as an audit event."""

import secrets
from datetime import datetime

from django.db import transaction

from audit.models import AuditEvent
from audit.services import audit_change, revoke_once
from core.api_tokens import API_TOKEN_PREFIX
from core.models import ApiToken
from core.tokens import token_fingerprint


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
    return revoke_once(
        token,
        action=AuditEvent.Action.API_TOKEN_REVOKED,
        actor=actor,
        target=f"api_token:{token.pk}",
        snapshot=_api_token_snapshot,
    )


def _api_token_snapshot(token: ApiToken) -> dict:
    return {
        "user": token.user.get_username(),
        "label": token.label,
        "display_prefix": token.display_prefix,
        "fingerprint": token.fingerprint,
        "expires_at": token.expires_at.isoformat(),
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }
