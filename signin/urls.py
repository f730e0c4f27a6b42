"""/oauth/: the authorization server (the toolkit's endpoints, in its namespace, which its
metadata view reverses) and the sign-in pages."""

from django.urls import path
from oauth2_provider import views as toolkit

from signin import views

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
]
