"""Start-up checks of how people sign in: a server nobody can sign in to, or a single sign-on
half configured, is refused before it serves (manage.py check, and every start)."""

from django.conf import settings
from django.core.checks import Error, Tags, register

_SSO_SETTINGS = (
    "OIDC_OP_ISSUER",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_RP_CLIENT_SECRET",
)


@register(Tags.security)
def check_sign_in_methods(app_configs=None, **kwargs) -> list[Error]:
    if not settings.LOCAL_LOGIN_ENABLED and not settings.SSO_ENABLED:
        return [
            Error(
                "LOCAL_LOGIN_ENABLED is off and no single sign-on is configured "
                "(OIDC_RP_CLIENT_ID): nobody could sign in.",
                id="hyperbook.E002",
            )
        ]
    if not settings.SSO_ENABLED:
        return []
    missing = [name for name in _SSO_SETTINGS if not getattr(settings, name, "")]
    if missing:
        return [
            Error(
                f"OIDC_RP_CLIENT_ID is set but {', '.join(missing)} is not: single sign-on "
                "needs the provider's issuer and endpoints (`manage.py sso_endpoints <issuer>` "
                "prints them) and the client's secret.",
                id="hyperbook.E003",
            )
        ]
    if settings.OIDC_RP_SIGN_ALGO not in {"RS256", "RS384", "RS512", "ES256", "ES384", "PS256"}:
        return [
            Error(
                "OIDC_RP_SIGN_ALGO must name an asymmetric algorithm the provider signs ID "
                "tokens with (RS256 by default).",
                id="hyperbook.E004",
            )
        ]
    return []
