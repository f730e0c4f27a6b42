"""Operational endpoints that sit outside any app's domain."""

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from core.health import health_report


@require_GET
def healthz(request):
    status, report = health_report()
    return JsonResponse(report, status=status)
