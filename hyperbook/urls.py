from django.contrib import admin
from django.urls import include, path
from django.views.generic.base import RedirectView
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

import kb.metrics  # noqa: F401  (their metrics are defined on import: listed at zero from the start)
import mcpserver.metrics  # noqa: F401
from audit.api import (
    AuditCheckpointViewSet,
    AuditEventViewSet,
    AuditorsAndAdmins,
    InclusionProofView,
    VerifierKeysView,
)
from core.metrics import MetricsView
from core.views import healthz
from signin import views as signin_views
from signin.urls import signin_patterns, sso_patterns, toolkit_patterns

router = DefaultRouter()
router.register("audit-events", AuditEventViewSet, basename="audit-event")
router.register("audit-checkpoints", AuditCheckpointViewSet, basename="audit-checkpoint")

urlpatterns = [
    # There is no public site: the front door is the admin.
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False), name="home"),
    path("healthz", healthz, name="healthz"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("admin/", admin.site.urls),
    path("oauth/", include((toolkit_patterns, "oauth2_provider"))),
    path("oauth/", include((signin_patterns, "signin"))),
    path("oidc/", include(sso_patterns)),
    # Where the MCP SDKs register a client when the metadata names no registration endpoint
    # (dynamic registration off): the same view, so they show why and what to do instead.
    path("register", signin_views.RegistrationView.as_view(), name="register"),
    path(
        ".well-known/oauth-authorization-server",
        signin_views.ServerMetadataView.as_view(),
        name="oauth-authorization-server",
    ),
    path("api/audit-verifier-keys/", VerifierKeysView.as_view(), name="audit-verifier-keys"),
    path(
        "api/audit-events/<int:sequence>/inclusion-proof/",
        InclusionProofView.as_view(),
        name="audit-event-inclusion-proof",
    ),
    path("api/", include(router.urls)),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[AuditorsAndAdmins]),
        name="api-schema",
    ),
]
