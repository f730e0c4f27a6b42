"""/metrics in the Prometheus text format, for the monitoring operators already run.

Each app defines its own metrics with prometheus_client (mcpserver: requests; kb: Select AI
answers; audit: the delivery backlog and checkpoints, read from the database at scrape time). No
label carries a token, a prompt or a stakeholder id: labels come from fixed lists only, which also
keeps their number bounded.

Served behind several web workers (bin/serve sets PROMETHEUS_MULTIPROC_DIR), each worker counts
into files of its own and a scrape sums them (prometheus_client's multiprocess mode); a single
process counts in memory.

Reachable with an API token (`Authorization: Token hbapi_…`) of a user who may read the audit
log, or from an address in METRICS_ALLOWED_NETWORKS; nothing else.
"""

from __future__ import annotations

import functools
import ipaddress
import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from core.api_tokens import ApiTokenAuthentication

# Collectors that read state at scrape time (the database), added by apps in their ready().
_scrape_collectors: list = []

SCRAPE_PERMISSION = "audit.view_auditevent"


def scrape_collector_add(collector) -> None:
    """A collector whose `collect()` reads what it reports, at every scrape."""
    _scrape_collectors.append(collector)


def metrics_text() -> bytes:
    registry = CollectorRegistry()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        MultiProcessCollector(registry, path=directory)  # every worker's files, summed
    else:
        registry.register(REGISTRY)  # this process's own counts
    for collector in _scrape_collectors:
        registry.register(collector)
    return generate_latest(registry)


def address_allowed(address: str) -> bool:
    """The socket's peer address is in METRICS_ALLOWED_NETWORKS (a forwarded header never is:
    the web server believes X-Forwarded-For only from FORWARDED_ALLOW_IPS)."""
    networks = _networks(tuple(settings.METRICS_ALLOWED_NETWORKS))
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


@functools.lru_cache(maxsize=8)
def _networks(raw: tuple[str, ...]) -> tuple:
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in raw)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"METRICS_ALLOWED_NETWORKS: not an address or a network: {exc}"
        ) from None


class MetricsAccess(BasePermission):
    def has_permission(self, request, view) -> bool:
        if address_allowed(request.META.get("REMOTE_ADDR", "")):
            return True
        user = request.user
        return bool(user and user.is_authenticated and user.has_perm(SCRAPE_PERMISSION))


class MetricsView(APIView):
    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [MetricsAccess]

    def get(self, request):
        return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
