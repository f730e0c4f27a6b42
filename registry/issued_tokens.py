"""The one-time token page's hand-over (Post/Redirect/Get): the token crosses from the POST that
issues it to the GET that shows it in an encrypted, HttpOnly cookie scoped to that page's path,
and is read once. Nothing holding the token is stored on the server."""

import base64
import hmac

from cryptography.fernet import Fernet, InvalidToken
from django.urls import reverse
from django.utils.crypto import salted_hmac

from core.tokens import token_fingerprint
from registry.models import TokenDelegation

COOKIE_NAME = "hyperbook_issued_token"
# Long enough for the redirect on a slow link, short enough that an unread hand-over expires.
HAND_OVER_SECONDS = 120


def issued_page_path(delegation: TokenDelegation) -> str:
    return reverse("admin:registry_tokendelegation_issued", args=[delegation.pk])


def token_hand_over(*, response, request, delegation: TokenDelegation, token: str) -> None:
    """Put the token in the cookie that only the delegation's one-time page receives."""
    sealed = _fernet().encrypt(f"{request.user.pk}:{delegation.pk}:{token}".encode())
    response.set_cookie(
        COOKIE_NAME,
        sealed.decode(),
        max_age=HAND_OVER_SECONDS,
        path=issued_page_path(delegation),
        secure=request.is_secure(),
        httponly=True,
        samesite="Strict",
    )


def token_take_over(*, request, response, delegation: TokenDelegation) -> str | None:
    """The token handed over for this delegation to this user, once: the cookie is cleared on
    `response` whatever it held. None when it was already shown, expired, or is not theirs."""
    sealed = request.COOKIES.get(COOKIE_NAME)
    response.delete_cookie(COOKIE_NAME, path=issued_page_path(delegation), samesite="Strict")
    if not sealed:
        return None
    try:
        opened = _fernet().decrypt(sealed.encode(), ttl=HAND_OVER_SECONDS).decode()
    except (InvalidToken, UnicodeDecodeError):
        return None
    user_pk, delegation_pk, token = (opened.split(":", 2) + ["", ""])[:3]
    if user_pk != str(request.user.pk) or delegation_pk != str(delegation.pk):
        return None
    # A hand-over is only good for the token whose fingerprint the delegation keeps.
    if not hmac.compare_digest(token_fingerprint(token), delegation.fingerprint):
        return None
    return token


def _fernet() -> Fernet:
    key = salted_hmac("registry.issued_tokens", "hand-over", algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(key))
