"""The sign-in pages: login (and its lockout page), consent (the toolkit's authorization
endpoint, with hyperbook's rules), the user's own list of agents, and a staff account's
authenticator app."""

import json
import math
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST
from oauth2_provider import views as toolkit
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error, InvalidRequestError

from registry.delegations import DelegationError
from signin.clients import REGISTRATION_CLOSED, requesting_agent
from signin.forms import (
    ConsentForm,
    LoginForm,
    TotpConfirmForm,
    TotpRemoveForm,
    grantable_tools,
)
from signin.grants import (
    GrantTerms,
    default_grant_expiry,
    grant_approve,
    grant_revocable_by,
    grant_revoke,
    grants_visible_to,
    stakeholder_of,
)
from signin.logins import lock_seconds_left
from signin.resources import issuer_for, resource_url_for
from signin.second_factor import (
    second_factor_set_up_due,
    totp_device_confirm,
    totp_device_of,
    totp_device_pending,
    totp_device_remove,
    totp_may_add,
    totp_secret_text,
    totp_setup_qr_svg,
)
from signin.server import (
    ID_JAG_GRANT_PROFILE,
    JWT_BEARER_GRANT,
    TokenBackend,
    offered_grants,
    pkce_value_valid,
    redirect_uri_registered,
)


class SigninLoginView(LoginView):
    """Django's login, in the admin's look (and under its CSP and session rules). When it is a
    step of an agent's sign-in, it names the agent that asks, so the user knows what the password
    is for. (Django's LoginView already answers with Cache-Control: no-store.)"""

    template_name = "signin/login.html"
    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "agent": requesting_agent(self.get_redirect_url()),
            "app_path": self.request.get_full_path(),
            "site_header": "hyperbook",
            "site_title": "hyperbook",
            "title": _("에이전트 로그인"),
        }


def lockout_page(request, original_response=None, credentials=None):
    """What a login gets while its account or address is locked (django-axes'
    AXES_LOCKOUT_CALLABLE): the login page's look, 429, and when to try again. The lock's details
    come from the request (axes passes its arguments differently on its async path)."""
    seconds = lock_seconds_left(request)
    # Back to the login page the login came from (with its next=); from anywhere else (a single
    # sign-on callback, whose query holds the provider's code), to the login page.
    back = resolve_url(settings.LOGIN_URL)
    if request.path in (reverse("admin:login"), reverse("signin:login")):
        back = request.get_full_path()
    response = render(
        request,
        "signin/lockout.html",
        {
            "minutes": math.ceil(seconds / 60),
            "login_url": back,
            "site_header": "hyperbook",
            "site_title": "hyperbook",
            "title": _("로그인 잠김"),
        },
        status=429,
    )
    response["Retry-After"] = str(seconds)
    add_never_cache_headers(response)
    return response


def _with_iss(uri: str, issuer: str) -> str:
    """RFC 9207: every authorization response names its issuer (errors too)."""
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "iss"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("iss", issuer)])))


@method_decorator(never_cache, name="dispatch")
class ConsentView(AuthorizationView):
    """The authorization endpoint. Before the page: the request must name /mcp as its resource
    (RFC 8707) and use PKCE with S256. On the page: which agent, as whom, which tools, until
    when. Approving creates the delegation the code will carry. Nothing of it is cached (no-store):
    the page carries the request's state and a CSRF token, and a shared or back-button copy must
    never approve for someone else."""

    template_name = "signin/consent.html"
    form_class = ConsentForm

    def validate_authorization_request(self, request):
        scopes, credentials = super().validate_authorization_request(request)
        redirect_uri, state = credentials.get("redirect_uri"), credentials.get("state")
        if credentials.get("code_challenge_method") != "S256":
            raise OAuthToolkitError(
                error=InvalidRequestError(
                    description="PKCE with code_challenge_method=S256 is required", state=state
                ),
                redirect_uri=redirect_uri,
            )
        if not pkce_value_valid(credentials.get("code_challenge")):
            raise OAuthToolkitError(
                error=InvalidRequestError(
                    description="code_challenge must be 43-128 characters of [A-Za-z0-9-._~]",
                    state=state,
                ),
                redirect_uri=redirect_uri,
            )
        ours = resource_url_for(request)
        if request.GET.getlist("resource") != [ours]:
            raise OAuthToolkitError(
                error=CustomOAuth2Error(
                    error="invalid_target",
                    description=f"resource must be {ours}",
                    state=state,
                ),
                redirect_uri=redirect_uri,
            )
        return scopes, credentials

    def redirect(self, redirect_to, application):
        if redirect_to and "iss=" not in (urlsplit(redirect_to).query or ""):
            redirect_to = _with_iss(redirect_to, issuer_for(self.request))
        return super().redirect(redirect_to, application)

    def get_initial(self):
        requested = self.oauth2_data.get("scopes", [])
        return {
            **super().get_initial(),
            "tools": [scope for scope in requested if scope in grantable_tools()],
            "expires_on": timezone.localdate(default_grant_expiry()),
        }

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = context.get("application")
        if application is None:
            client_id = self.request.POST.get("client_id") or self.oauth2_data.get("client_id")
            application = get_application_model().objects.filter(client_id=client_id).first()
        context.update(
            {
                "application": application,
                "unverified": application is not None
                and application.registration_source != application.RegistrationSource.MANUAL,
                "stakeholder": stakeholder_of(self.request.user),
                "site_header": "hyperbook",
                "title": _("에이전트 연결 승인"),
            }
        )
        return context

    def form_valid(self, form):
        if not form.cleaned_data.get("allow"):
            return super().form_valid(form)
        application = get_application_model().objects.get(client_id=form.cleaned_data["client_id"])
        try:
            delegation = grant_approve(
                user=self.request.user,
                client_id=application.client_id,
                client_name=application.name,
                resource=resource_url_for(self.request),
                terms=GrantTerms(tools=form.cleaned_data["tools"], expires_at=form.expires_at()),
            )
        except DelegationError as exc:  # GrantRefused, or terms outside the rules
            form.add_error(None, str(exc))
            return self.form_invalid(form)
        self.delegation_id = delegation.pk
        form.cleaned_data["scope"] = " ".join(delegation.tools)
        return super().form_valid(form)

    def render_to_response(self, context, **kwargs):
        """The page's form posts here, and the answer redirects to the client: browsers hold that
        redirect to the CSP's form-action too, so the client's (registered) origin joins it."""
        response = super().render_to_response(context, **kwargs)
        application = context.get("application")
        redirect_uri = self.oauth2_data.get("redirect_uri") or self.request.POST.get("redirect_uri")
        if (
            application is not None
            and redirect_uri
            and redirect_uri_registered(redirect_uri, application)
        ):
            parts = urlsplit(redirect_uri)
            response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"]}
        return response

    def form_invalid(self, form):
        # The toolkit's view keeps the request's details on the form's hidden fields.
        context = self.get_context_data(form=form)
        if context.get("application") is None:
            # A post naming no known client (our page always names one): there is no consent
            # to show again and nowhere to redirect; a plain 400.
            raise BadRequest("unknown client")
        return self.render_to_response(context, status=400)

    def create_authorization_response(self, request, scopes, credentials, allow):
        if allow:
            credentials = {**credentials, "delegation_id": self.delegation_id}
        return super().create_authorization_response(request, scopes, credentials, allow)


class TokenView(toolkit.TokenView):
    """The toolkit's token endpoint, without its look-up of the new token by its plain SHA-256
    (this server keeps fingerprints, and nothing here listens for that signal), and without its
    device-flow branch: every request goes to signin.server.TokenServer, which answers the grants
    hyperbook offers and refuses the rest before reading anything else."""

    oauthlib_backend_class = TokenBackend

    def post(self, request, *args, **kwargs):
        return self.authorization_flow_token_response(request)

    @method_decorator(
        sensitive_post_parameters(
            "code", "code_verifier", "refresh_token", "assertion", "client_secret"
        )
    )
    def authorization_flow_token_response(self, request, *args, **kwargs):
        _url, headers, body, status = self.create_token_response(request)
        response = HttpResponse(content=body, status=status, content_type="application/json")
        for name, value in headers.items():
            response[name] = value
        return response


@method_decorator(csrf_exempt, name="dispatch")
class RegistrationView(toolkit.DynamicClientRegistrationView):
    """RFC 7591 registration, at /oauth/register/ and at /register (where the MCP SDKs post when
    the metadata names no registration endpoint). While OAUTH_DCR_ENABLED is off, a JSON error
    that says how to get a client instead, not a bare 404 the SDK can only report as such."""

    def dispatch(self, request, *args, **kwargs):
        if not oauth2_settings.DCR_ENABLED:
            response = JsonResponse(REGISTRATION_CLOSED, status=400)
            response["Cache-Control"] = "no-store"
            return response
        return super().dispatch(request, *args, **kwargs)


def _safe_next(request) -> str:
    """The page the user came from, when the link said so (?next=, or the revoke form's next):
    one of our own pages only, never a redirect elsewhere."""
    next_url = request.GET.get("next") or request.POST.get("next") or ""
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return next_url
    return ""


def _back_url(request) -> str:
    """Where the agents page leads back to: where the user came from, else the admin's index for
    those who use the admin; "" for neither."""
    return _safe_next(request) or (reverse("admin:index") if request.user.is_staff else "")


@login_required
def my_agents(request):
    """내 에이전트 연결: the grants this login made (everyone's, for those who may see every
    delegation), with revoke buttons where the user may revoke."""
    grants = list(grants_visible_to(request.user).order_by("-created_at")[:500])
    now = timezone.now()
    rows = [
        {
            "grant": grant,
            "state": grant.state(now=now),
            "revocable": grant.state(now=now) == "active"
            and grant_revocable_by(request.user, grant),
        }
        for grant in grants
    ]
    return render(
        request,
        "signin/my_agents.html",
        {
            "rows": rows,
            "back_url": _back_url(request),
            "next": _safe_next(request),
            "stakeholder": stakeholder_of(request.user),
            "site_header": "hyperbook",
            "title": _("내 에이전트 연결"),
        },
    )


@login_required
@require_POST
def my_agent_revoke(request, pk: int):
    grant = get_object_or_404(grants_visible_to(request.user), pk=pk)
    if not grant_revocable_by(request.user, grant):
        raise PermissionDenied
    if grant_revoke(
        delegation=grant,
        reason=request.POST.get("reason") or _("사용자가 연결을 해제함"),
        revoked_by=request.user,
    ):
        messages.success(request, _("%(agent)s 연결을 해제했습니다.") % {"agent": grant.agent_name})
    back = _safe_next(request)
    if back:  # the list's way back stays after a revoke
        return redirect(f"{reverse('signin:my-agents')}?{urlencode({'next': back})}")
    return redirect("signin:my-agents")


def _second_factor_page(request, *, status: int = 200, **context):
    return render(
        request,
        "signin/second_factor.html",
        {
            **context,
            "next": _safe_next(request),
            "back_url": _back_url(request),
            "site_header": "hyperbook",
            "title": _("인증 앱"),
        },
        status=status,
    )


@never_cache
@sensitive_post_parameters("code")
@login_required
def second_factor(request):
    """인증 앱: add one (scan the QR code or type the secret, then confirm with a code it shows),
    or see the one added and remove it."""
    if not totp_may_add(request.user):
        raise PermissionDenied
    device = totp_device_of(request.user)
    if device is not None:
        return _second_factor_page(
            request, device=device, remove_form=TotpRemoveForm(request=request, device=device)
        )
    pending = totp_device_pending(request.user)
    form = TotpConfirmForm(
        request.POST if request.method == "POST" else None, user=request.user, device=pending
    )
    if form.is_valid():
        totp_device_confirm(request=request, device=pending)
        messages.success(
            request, _("인증 앱을 등록했습니다. 다음 로그인부터 인증 코드를 묻습니다.")
        )
        return redirect(_safe_next(request) or "signin:second-factor")
    return _second_factor_page(
        request,
        pending=pending,
        confirm_form=form,
        qr_svg=totp_setup_qr_svg(pending),
        secret=totp_secret_text(pending),
        required=second_factor_set_up_due(request),
        status=400 if form.is_bound else 200,
    )


@never_cache
@sensitive_post_parameters("proof")
@login_required
@require_POST
def second_factor_remove(request):
    if not totp_may_add(request.user):
        raise PermissionDenied
    device = totp_device_of(request.user)
    if device is None:
        return redirect("signin:second-factor")
    form = TotpRemoveForm(request.POST, request=request, device=device)
    if not form.is_valid():
        return _second_factor_page(request, device=device, remove_form=form, status=400)
    totp_device_remove(user=request.user, actor=request.user, request=request)
    messages.success(request, _("인증 앱을 삭제했습니다. 로그인에 인증 코드를 묻지 않습니다."))
    return redirect("signin:second-factor")


class ServerMetadataView(toolkit.OAuthServerMetadataView):
    """RFC 8414 metadata, advertising exactly the grants the token endpoint answers."""

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        metadata = json.loads(response.content)
        metadata["grant_types_supported"] = offered_grants()
        if JWT_BEARER_GRANT in metadata["grant_types_supported"]:
            # SEP-990: the jwt-bearer grant here takes ID-JAGs, which is said as a grant profile.
            metadata["authorization_grant_profiles_supported"] = [ID_JAG_GRANT_PROFILE]
        response.content = json.dumps(metadata)
        return response
