"""/oauth/: the authorization server (the toolkit's endpoints, in its namespace, which its
metadata view reverses) and the sign-in pages."""

from django.urls import path
from oauth2_provider import views as toolkit

from signin import sso, views

toolkit_patterns = [
    path("authorize/", views.ConsentView.as_view(), name="authorize"),
    path("token/", views.TokenView.as_view(), name="token"),
    path("revoke_token/", toolkit.RevokeTokenView.as_view(), name="revoke-token"),
    # While OAUTH_DCR_ENABLED (the toolkit's DCR_ENABLED) is off, a JSON error saying how to
    # get a client registered in advance; the MCP SDKs' fallback path /register answers alike.
    path("register/", views.RegistrationView.as_view(), name="dcr-register"),
    path(
        "register/<str:client_id>/",
        toolkit.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

signin_patterns = [
    path("login/", views.SigninLoginView.as_view(), name="login"),
    path("agents/", views.my_agents, name="my-agents"),
    path("agents/<int:pk>/revoke/", views.my_agent_revoke, name="my-agent-revoke"),
    path("second-factor/", views.second_factor, name="second-factor"),
    path("second-factor/remove/", views.second_factor_remove, name="second-factor-remove"),
]

# /oidc/: single sign-on for people through the company's OpenID Connect provider (404 unless
# OIDC_RP_CLIENT_ID is set). The provider's redirect URI for hyperbook is /oidc/callback/.
sso_patterns = [
    path("authenticate/", sso.SsoStartView.as_view(), name="oidc_authentication_init"),
    path("callback/", sso.SsoCallbackView.as_view(), name="oidc_authentication_callback"),
]
