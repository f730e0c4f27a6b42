"""What the login pages offer (the admin's and /oauth/login/ share one template)."""

from django.conf import settings


def sign_in_options(request) -> dict:
    return {
        "sign_in": {
            "sso_enabled": settings.SSO_ENABLED,
            "local_login_enabled": settings.LOCAL_LOGIN_ENABLED,
        }
    }
