"""Single sign-on for people (operators, auditors, stakeholders) through the company's OpenID
Connect provider, with mozilla-django-oidc doing the code flow (PKCE, state, nonce, the ID
token's signature against the provider's JWKS).

What it leaves to its users is checked here: the ID token's issuer and audience (OpenID Connect
Core 3.1.3.7: mozilla-django-oidc checks neither) and that the userinfo response speaks of the
same subject (5.3.2). A sign-in that fails for any reason, the provider's own error included, is
audited and shown on the login page; it never becomes a 500. Who the person is in hyperbook is
decided in signin/sso_accounts.py.
"""

import logging
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from audit.services import request_origin
from signin.sso_accounts import Claims, SsoRefused, sso_refusal_record, sso_sign_in

logger = logging.getLogger(__name__)

# The session key mozilla-django-oidc keeps the page to return to under.
_NEXT_SESSION_KEY = "oidc_login_next"


def _request_origin(request) -> dict[str, str]:
    return request_origin(request.META)


def _own_page(request, url: str | None) -> str:
    """`url` when it is one of our own pages (the same check as signin.views), else ""."""
    if url and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return url
    return ""


class SsoBackend(OIDCAuthenticationBackend):
    """The authentication backend of a sign-in through the provider."""

    def authenticate(self, request, **kwargs):
        if request is None or "code" not in request.GET or "state" not in request.GET:
            return None  # a password login, or no callback: not ours
        try:
            return super().authenticate(request, **kwargs)
        except SsoRefused as refusal:
            request.sso_refusal = refusal.message
            sso_refusal_record(refusal.reason, **_request_origin(request))
        except (SuspiciousOperation, jwt.PyJWTError, requests.RequestException, ValueError) as exc:
            # The class names the failure; the message is not kept, as the provider's error
            # response it may quote could carry the code.
            reason = f"provider_or_token: {type(exc).__name__}"
            logger.warning("single sign-on refused: %s", reason)
            sso_refusal_record(reason, **_request_origin(request))
        return None

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        if payload.get("iss") != settings.OIDC_OP_ISSUER:
            raise SuspiciousOperation("the ID token's issuer is not the configured provider")
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the ID token is not for this client")
        if len(audiences) > 1 and payload.get("azp") != settings.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("the ID token's authorized party is another client")
        return payload

    def get_or_create_user(self, access_token, id_token, payload):
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the userinfo response is about another subject")
        claims = Claims.read(settings.OIDC_OP_ISSUER, userinfo)
        return sso_sign_in(claims, **_request_origin(self.request))


class _OnlyWhenConfigured:
    def dispatch(self, request, *args, **kwargs):
        if not settings.SSO_ENABLED:
            raise Http404
        return super().dispatch(request, *args, **kwargs)


class SsoStartView(_OnlyWhenConfigured, OIDCAuthenticationRequestView):
    """Sends the person to the provider (state, nonce and the PKCE verifier kept in the session)."""

    def __init__(self, *args, **kwargs):
        if settings.SSO_ENABLED:  # the parent reads the provider's endpoints from the settings
            super().__init__(*args, **kwargs)


class SsoCallbackView(_OnlyWhenConfigured, OIDCAuthenticationCallbackView):
    """Where the provider sends the person back. Success leads to the page they came for (or
    their home: the admin for operators, their agents for stakeholders); failure back to the
    login page, saying why."""

    def get(self, request):
        started = request.session.get("oidc_states") or {}
        if "code" in request.GET and request.GET.get("state") not in started:
            # A callback this browser never started: a replayed or forged one, or a second tab's.
            sso_refusal_record("state_unknown", **_request_origin(request))
            return self.login_failure()
        return super().get(request)

    def login_failure(self):
        refusal = getattr(self.request, "sso_refusal", None)
        if self.request.GET.get("error"):
            # The provider's own refusal (e.g. the person cancelled): audited here, as no
            # backend ran.
            sso_refusal_record(
                f"provider_error: {self.request.GET['error'][:64]}",
                **_request_origin(self.request),
            )
        messages.error(self.request, refusal or _("회사 계정으로 로그인하지 못했습니다."))
        login = reverse(settings.LOGIN_URL)
        wanted = _own_page(self.request, self.request.session.get(_NEXT_SESSION_KEY))
        if wanted:
            login = f"{login}?{urlencode({'next': wanted})}"
        return HttpResponseRedirect(login)

    @property
    def success_url(self):
        wanted = _own_page(self.request, self.request.session.pop(_NEXT_SESSION_KEY, None))
        if wanted:
            return wanted
        return reverse("admin:index" if self.user.is_staff else "signin:my-agents")
