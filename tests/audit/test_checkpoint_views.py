"""What auditors see of checkpoints and keys, and filters that come from the events themselves."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit import selectors
from audit.api_tokens import api_token_issue
from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.models import AuditCheckpoint
from audit.services import audit_events_append
from audit.signed_note import Verifier, open_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed():
    audit_events_append(
        events=[
            # Neither the stakeholders nor the tools below exist as rows any more (or ever did).
            {"action": "mcp.tools_call", "outcome": "allowed", "stakeholder_id": "KB-P-GONE",
             "tool": "retired.tool"},
            {"action": "mcp.tools_call", "outcome": "forbidden", "stakeholder_id": "KB-B-001",
             "tool": "ords.query.kb_select_ai_vpd"},
            {"action": "mcp.tools_list", "outcome": "unauthenticated"},
        ]
    )  # fmt: skip
    return checkpoint_create_if_due()


def test_the_filters_list_what_the_events_say_even_of_deleted_rows(client, auditor, signed):
    client.force_login(auditor)
    body = client.get("/admin/audit/auditevent/").content.decode()
    for value in ("KB-P-GONE", "KB-B-001", "retired.tool", "ords.query.kb_select_ai_vpd"):
        assert f"={value}" in body.replace("%2E", "."), value
    found = client.get("/admin/audit/auditevent/", {"stakeholder_id": "KB-P-GONE"})
    assert found.context["cl"].result_count == 1
    found = client.get("/admin/audit/auditevent/", {"tool": "retired.tool"})
    assert found.context["cl"].result_count == 1


def test_values_seen_is_one_query_of_index_seeks(signed):
    with CaptureQueriesContext(connection) as queries:
        assert selectors.values_seen("stakeholder_id") == ["KB-B-001", "KB-P-GONE"]
    assert len(queries) == 1
    assert selectors.values_seen("tool", limit=1) == ["ords.query.kb_select_ai_vpd"]
    with pytest.raises(ValueError):
        selectors.values_seen("hash; DROP TABLE audit_auditevent")


def test_auditors_see_the_latest_checkpoint_and_the_keys(client, auditor, signed):
    client.force_login(auditor)
    body = client.get("/admin/audit/auditevent/").content.decode()
    assert 'id="latest-checkpoint"' in body and f"#{signed.sequence}" in body
    body = client.get("/admin/audit/auditcheckpoint/").content.decode()
    assert current_signer().verifier.text() in body
    assert client.get(f"/admin/audit/auditcheckpoint/{signed.pk}/change/").status_code == 200
    # Read-only: no deleting or changing a checkpoint, whoever asks.
    response = client.post(f"/admin/audit/auditcheckpoint/{signed.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert AuditCheckpoint.objects.filter(pk=signed.pk).exists()


def test_the_api_serves_the_latest_checkpoint_and_the_verifier_keys(client, auditor, signed):
    assert client.get("/api/audit-checkpoints/latest/").status_code in (401, 403)
    assert client.get("/api/audit-verifier-keys/").status_code in (401, 403)
    expires = timezone.now() + timedelta(days=1)
    _, token = api_token_issue(user=auditor, label="outside auditor", expires_at=expires)
    headers = {"HTTP_AUTHORIZATION": f"Token {token}"}
    keys = client.get("/api/audit-verifier-keys/", **headers).json()
    assert [key["current"] for key in keys] == [True] and keys[0]["trusted"]
    latest = client.get("/api/audit-checkpoints/latest/", **headers).json()
    checkpoint = open_checkpoint(latest["note"], [Verifier.from_text(keys[0]["verifier_key"])])
    assert (checkpoint.size, checkpoint.root_hash) == (signed.sequence, signed.hash)
    assert latest["delivery_state"] == "pending"
    listed = client.get("/api/audit-checkpoints/", **headers).json()["results"]
    assert [item["number"] for item in listed] == [1]


def test_a_staff_user_outside_the_groups_sees_nothing(client, signed):
    staff = User.objects.create_user("staff", password="pw-for-tests-only", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/audit/auditcheckpoint/").status_code == 403
    assert client.get("/api/audit-checkpoints/latest/").status_code == 403
