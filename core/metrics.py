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
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from core.api_tokens import ApiTokenAuthentication

# Collectors that read state at scrape time (the database), added by apps in their ready().
_scrape_collectors: list[Callable[[], object]] = []

SCRAPE_PERMISSION = "audit.view_auditevent"


def scrape_collector_add(make: Callable[[], object]) -> None:
    """`make()` returns a collector for one scrape (its `collect()` reads what it reports)."""
    _scrape_collectors.append(make)


def metrics_text() -> bytes:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)
    else:
        registry = CollectorRegistry()
        registry.register(_Everything(REGISTRY))
    for make in _scrape_collectors:
        registry.register(make())
    return generate_latest(registry)


class _Everything:
    """The process's own metrics, beside the scrape-time collectors, in one registry."""

    def __init__(self, source):
        self.source = source

    def collect(self):
        return self.source.collect()


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
