"""/metrics: the Prometheus text format, only with an API token of someone who may read the audit
log or from an allowed address (never because of a forwarded header), with the audit log's state
read at scrape time."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from audit.api_tokens import api_token_issue
from audit.models import AuditEvent
from audit.services import audit_events_append
from core.groups import ensure_default_groups

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def samples(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def token_for(group: str | None) -> str:
    ensure_default_groups()
    user = User.objects.create_user(f"scraper-{group}", password="pw-scrape-1")
    if group:
        user.groups.add(Group.objects.get(name=group))
    _, token = api_token_issue(
        user=user, label="prometheus", expires_at=timezone.now() + timedelta(days=1)
    )
    return token


def test_nobody_reads_metrics_without_a_token_or_an_allowed_address(client):
    assert client.get("/metrics").status_code in (401, 403)
    # A forwarded header names an allowed address; the socket's peer is what counts.
    with override_settings(METRICS_ALLOWED_NETWORKS=["10.0.0.0/8"]):
        spoofed = client.get("/metrics", HTTP_X_FORWARDED_FOR="10.1.2.3")
        assert spoofed.status_code in (401, 403)


def test_an_allowed_network_reads_the_audit_state(client):
    audit_events_append(
        events=[{"action": AuditEvent.Action.MCP_TOOLS_LIST, "outcome": "allowed"}] * 3
    )
    with override_settings(METRICS_ALLOWED_NETWORKS=["127.0.0.0/8", "::1"]):
        response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    values = samples(response.content.decode())
    assert values["hyperbook_audit_backlog_events"] == 3
    assert values["hyperbook_audit_oldest_undelivered_age_seconds"] >= 0
    assert values["hyperbook_audit_delivery_rejected_events"] == 0
    assert "hyperbook_audit_last_checkpoint_age_seconds" not in values  # none signed yet


def test_an_auditors_api_token_reads_metrics_and_a_groupless_one_does_not(client):
    auditor = token_for("auditors")
    ok = client.get("/metrics", HTTP_AUTHORIZATION=f"Token {auditor}")
    assert ok.status_code == 200 and b"hyperbook_mcp_requests" in ok.content
    nobody = token_for(None)
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {nobody}").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Token hbapi_forged").status_code == 401


def test_a_network_that_is_not_one_is_a_configuration_error(client):
    with override_settings(METRICS_ALLOWED_NETWORKS=["10.0.0.0/33"]):
        with pytest.raises(ImproperlyConfigured, match="METRICS_ALLOWED_NETWORKS"):
            client.get("/metrics", REMOTE_ADDR="10.0.0.1")
