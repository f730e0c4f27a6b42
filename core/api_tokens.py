"""DRF authentication of the REST API with `Authorization: Token <key>` (tokens: core.models)."""

from django.utils import timezone
from rest_framework import authentication, exceptions

from core.models import ApiToken
from core.tokens import token_fingerprint

API_TOKEN_PREFIX = "hbapi_"  # noqa: S105  (a public marker, not a secret)


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
