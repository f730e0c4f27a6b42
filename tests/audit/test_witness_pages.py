"""Where auditors see the tree and the witnesses: the checkpoint list, the overview, and an event's
"prove this event" download, which verifies on its own."""

import pytest

from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.models import AuditEvent
from audit.services import audit_events_append
from audit.verify import main as verify_main
from audit.witnesses import witness_latest
from tests.audit.witness_standin import WitnessStandIn

pytestmark = pytest.mark.django_db


@pytest.fixture
def witnessed_log(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10_000
    settings.AUDIT_WITNESS_TIMEOUT_SECONDS = 1
    log_key = current_signer().verifier
    with WitnessStandIn("w1.example", log_key) as one, WitnessStandIn("w2.example", log_key) as two:
        settings.AUDIT_WITNESSES = [one.setting(), two.setting()]
        settings.AUDIT_WITNESS_QUORUM = 2
        audit_events_append(events=[{"action": "mcp.tools_list", "outcome": "allowed"}] * 6)
        checkpoint_create_if_due(force=True)
        two.mode = "down"
        witness_latest("hyperbook")
        yield one, two


def test_the_checkpoint_list_shows_the_rule_the_cosignatures_and_each_witness(
    client, auditor, witnessed_log
):
    client.force_login(auditor)
    page = client.get("/admin/audit/auditcheckpoint/").content.decode()
    assert "머클 트리 루트" in page and "1 / 2" in page
    assert 'data-witness="w1.example"' in page and 'data-witness="w2.example"' in page
    assert "witness w2.example: it answered 500" in page  # the failing one says why


def test_the_overview_says_the_latest_checkpoint_is_not_yet_witnessed(
    client, auditor, witnessed_log
):
    client.force_login(auditor)
    page = client.get("/admin/audit/auditevent/overview/").content.decode()
    assert 'data-witnessed="0"' in page and "증인 미확인 체크포인트 1개" in page
    _, two = witnessed_log
    two.mode = "honest"
    witness_latest("hyperbook")
    page = client.get("/admin/audit/auditevent/overview/").content.decode()
    assert 'data-witnessed="1"' in page and "증인 미확인 체크포인트 0개" in page


def test_prove_this_event_downloads_a_bundle_that_verifies(
    client, auditor, witnessed_log, tmp_path, capsys
):
    client.force_login(auditor)
    event = AuditEvent.objects.get(sequence=4)
    page = client.get(f"/admin/audit/auditevent/{event.pk}/change/").content.decode()
    assert f"/admin/audit/auditevent/{event.pk}/proof/" in page
    response = client.get(f"/admin/audit/auditevent/{event.pk}/proof/")
    assert response.status_code == 200
    assert "audit-event-4-proof.jsonl" in response["Content-Disposition"]
    path = tmp_path / "proof.jsonl"
    path.write_bytes(response.content)
    one, _ = witnessed_log
    args = [str(path), "--public-key", current_signer().verifier.text()]
    assert verify_main([*args, "--witness-key", one.verifier.text()]) == 0
    said = capsys.readouterr().out
    assert said.startswith("ok: 1 event proven") and "quorum 1 of 1): the one at size" in said
    assert AuditEvent.objects.filter(action="audit.exported").exists()
