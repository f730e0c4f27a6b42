"""/mcp requests -> events -> a real Celery worker signs checkpoints, has a loopback witness cosign
them and delivers them to a loopback Memory API -> the chain is checked against that anchor, and an
export verifies on its own, witnessed."""

import io
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from audit.checkpoints import current_signer
from audit.models import AuditCheckpoint, ChainHead, Cosignature, WitnessState
from audit.reconciliation import reconcile_with_memory_api
from audit.signed_note import open_checkpoint
from audit.verification import verify_chain
from kb.models import Stakeholder
from registry.services import delegation_issue
from tests.audit.memory_sink import MemorySink
from tests.audit.test_delivery_workers import (
    SERVICE_TOKEN,
    environment,
    pending_count,
    start_worker,
    stop,
    wait_until,
)
from tests.audit.witness_standin import WitnessStandIn
from tests.live import ROOT, live_server
from tests.mcpserver.conftest import MCP_HEADERS, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]


@pytest.fixture(scope="module")
def planner_token(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        call_command("load_kb_demo", verbosity=0)
        planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
        expires = timezone.now() + timedelta(days=1)
        _, token = delegation_issue(stakeholder=planner, agent_name="signer", expires_at=expires)
    return token


def anchored_head(sink: MemorySink, django_db_blocker) -> bool:
    """The Memory API holds a checkpoint over the chain's current head."""
    with django_db_blocker.unblock():
        connection.close()
        head = ChainHead.objects.get(source="hyperbook").last_sequence
    held = sink.of_kind("audit_checkpoint").values()
    return any(memory["sequence"] == head for memory in held)


def witness_caught_up(django_db_blocker) -> bool:
    """The witness has cosigned the latest checkpoint."""
    with django_db_blocker.unblock():
        connection.close()
        latest = AuditCheckpoint.objects.order_by("-sequence").first()
        state = WitnessState.objects.filter(name="witness.example").first()
    return latest is not None and state is not None and state.last_size == latest.sequence


def test_a_worker_signs_and_delivers_checkpoints_that_anchor_the_chain(
    planner_token, broker, tmp_path, django_db_blocker, settings
):
    witness = WitnessStandIn("witness.example", current_signer().verifier)
    with MemorySink(SERVICE_TOKEN) as sink, witness:
        env = {
            **environment(sink),
            "AUDIT_CHECKPOINT_EVERY": "10",
            "AUDIT_CHECKPOINT_SECONDS": "2",
            "AUDIT_WITNESSES": witness.setting(),
        }
        with live_server(tmp_path / "server.log", env) as url:
            worker = start_worker(env, tmp_path / "worker.log", tmp_path / "beat")
            try:
                with httpx.Client(timeout=30) as client:
                    headers = {**MCP_HEADERS, "Authorization": f"Bearer {planner_token}"}
                    for _ in range(3):  # three rounds, a checkpoint interval apart
                        for _ in range(12):
                            response = client.post(
                                f"{url}/mcp", json=rpc("tools/list"), headers=headers
                            )
                            assert response.status_code == 200
                        wait_until(
                            lambda: anchored_head(sink, django_db_blocker), 60, "a checkpoint"
                        )
                wait_until(lambda: pending_count(django_db_blocker) == 0, 60, "delivery")
                wait_until(lambda: witness_caught_up(django_db_blocker), 60, "a cosignature")
            finally:
                stop(worker)
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")

        # Delivered as their own kind, each note signed by our key over a head the chain had.
        verifier = current_signer().verifier
        held = sink.of_kind("audit_checkpoint")
        assert len(held) >= 3
        for memory in held.values():
            signed = open_checkpoint(memory["content"]["note"], [verifier])
            assert (signed.size, signed.root_hash) == (memory["sequence"], memory["hash"])
        # The signer key itself went nowhere: not to the Memory API, not into the log.
        secret = current_signer().text().rsplit("+", 1)[1]
        assert secret not in worker_log
        assert secret.encode() not in b"".join(sink.raw_bodies)

        with django_db_blocker.unblock():
            connection.close()
            settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
            assert AuditCheckpoint.objects.filter(delivery__state="delivered").count() >= 3
            # The worker took each checkpoint to the witness, which checked the consistency proof
            # from the size it last cosigned and answered with a cosignature the worker kept.
            cosigned = Cosignature.objects.filter(witness_key=witness.verifier.text())
            assert cosigned.count() >= 3
            state = WitnessState.objects.get(name="witness.example")
            assert state.last_size == witness.size == max(c.checkpoint.sequence for c in cosigned)
            assert witness.requests[0].startswith("old 0\n")
            assert any(not r.startswith("old 0\n") for r in witness.requests)
            assert verify_chain().ok
            anchored = reconcile_with_memory_api()
            assert anchored.ok, anchored.message
            export = tmp_path / "audit.jsonl"
            with export.open("w") as out:
                call_command("export_audit", stdout=out, stderr=io.StringIO())

    # The export checks out with nothing but the verifier key: no Django, no database.
    verified = subprocess.run(
        [
            *(sys.executable, "-m", "audit.verify", str(export)),
            *("--public-key", verifier.text(), "--witness-key", witness.verifier.text()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("ok:")
    assert "witnessed (quorum 1 of 1): " in verified.stdout
    assert "witnessed (quorum 1 of 1): none" not in verified.stdout
