"""The sign-in pages: login, consent (the toolkit's authorization endpoint, with hyperbook's
rules), and the user's own list of agents."""

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST
from oauth2_provider import views as toolkit
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error, InvalidRequestError

from registry.delegations import DelegationError
from signin.forms import ConsentForm, grantable_tools
from signin.grants import (
    GrantTerms,
    default_grant_expiry,
    grant_approve,
    grant_revocable_by,
    grant_revoke,
    grants_visible_to,
    stakeholder_of,
)
from signin.resources import issuer_for, resource_url_for


class SigninLoginView(LoginView):
    """Django's login, in the admin's look (and under its CSP and session rules)."""

    template_name = "admin/login.html"

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "app_path": self.request.get_full_path(),
            "site_header": "hyperbook",
            "site_title": "hyperbook",
            "title": _("에이전트 로그인"),
        }


def _with_iss(uri: str, issuer: str) -> str:
    """RFC 9207: every authorization response names its issuer (errors too)."""
    parts = urlsplit(uri)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "iss"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("iss", issuer)])))


class ConsentView(AuthorizationView):
    """The authorization endpoint. Before the page: the request must name /mcp as its resource
    (RFC 8707) and use PKCE with S256. On the page: which agent, as whom, which tools, until
    when. Approving creates the delegation the code will carry."""

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
            and application.redirect_uri_allowed(redirect_uri)
        ):
            parts = urlsplit(redirect_uri)
            response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"]}
        return response

    def form_invalid(self, form):
        # The toolkit's view keeps the request's details on the form's hidden fields.
        return self.render_to_response(self.get_context_data(form=form), status=400)

    def create_authorization_response(self, request, scopes, credentials, allow):
        if allow:
            credentials = {**credentials, "delegation_id": self.delegation_id}
        return super().create_authorization_response(request, scopes, credentials, allow)


class TokenView(toolkit.TokenView):
    """The toolkit's token endpoint, without its look-up of the new token by its plain SHA-256
    (this server keeps fingerprints, and nothing here listens for that signal)."""

    @method_decorator(sensitive_post_parameters("code", "code_verifier", "refresh_token"))
    def authorization_flow_token_response(self, request, *args, **kwargs):
        _url, headers, body, status = self.create_token_response(request)
        response = HttpResponse(content=body, status=status, content_type="application/json")
        for name, value in headers.items():
            response[name] = value
        return response


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
    return redirect("signin:my-agents")
