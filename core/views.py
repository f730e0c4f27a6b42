"""Operational endpoints that sit outside any app's domain."""

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from core.health import broker_is_reachable, database_is_reachable


@require_GET
def healthz(request):
    checks = {"database": database_is_reachable(), "broker": broker_is_reachable()}
    healthy = all(checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status=200 if healthy else 503,
    )
