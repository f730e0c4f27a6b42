"""Every way an auditor can take the log away proves itself to the standalone verifier (`python -m
audit.verify`, run as its own process with nothing but the verifier key): the admin's download of
the whole list and of a filtered list, the API's export with and without filters, and `manage.py
export_audit`. Each download's own audit event follows it and is not in it; on a young log with
no checkpoint yet, one is signed for the download."""

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from audit.checkpoints import current_signer
from audit.models import AuditCheckpoint, AuditEvent
from audit.services import audit_events_append
from core.groups import AUDITORS, ensure_default_groups
from tests.live import ROOT

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def young_log():
    """A few events, and no checkpoint at all yet."""
    audit_events_append(
        events=[
            {
                "action": AuditEvent.Action.MCP_TOOLS_CALL,
                "outcome": outcome,
                "detail": reason,
                "request_id": f"req-{i}",
                "http_status": 200,
            }
            for i, (outcome, reason) in enumerate(
                [("allowed", ""), ("refused", "out_of_data"), ("allowed", ""), ("forbidden", "x")]
            )
        ]
    )
    assert not AuditCheckpoint.objects.exists()


@pytest.fixture
def auditor() -> Client:
    ensure_default_groups()
    user = User.objects.create_user("auditor", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS))
    client = Client()
    client.force_login(user)
    return client


def standalone_verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *(sys.executable, "-m", "audit.verify", str(path)),
            *("--public-key", current_signer().verifier.text()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )


def downloaded(response, tmp_path: Path, name: str) -> Path:
    assert response.status_code == 200, response.content[:500]
    path = tmp_path / name
    path.write_bytes(b"".join(response.streaming_content))
    return path


def sequences_in(path: Path) -> set[int]:
    found = set()
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["type"] == "audit_event":  # an export's event
            found.add(record["sequence"])
        elif "event" in record:  # a proof bundle's proven event
            found.add(record["event"]["sequence"])
    return found


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/admin/audit/auditevent/export/", "admin-whole"),
        ("/admin/audit/auditevent/export/?outcome__exact=refused", "admin-filtered"),
        ("/api/audit-events/export/", "api-whole"),
        ("/api/audit-events/export/?outcome=refused", "api-filtered"),
    ],
)
def test_each_download_verifies_and_its_own_event_follows_it(
    young_log, auditor, tmp_path, url, name
):
    path = downloaded(auditor.get(url), tmp_path, f"{name}.jsonl")
    verified = standalone_verify(path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("ok:")
    exported = AuditEvent.objects.get(action=AuditEvent.Action.AUDIT_EXPORTED)
    held = sequences_in(path)
    assert exported.sequence not in held, "the export's own event is not in it"
    assert exported.sequence > max(held)
    if "filtered" in name:
        refused = set(
            AuditEvent.objects.filter(outcome="refused").values_list("sequence", flat=True)
        )
        assert held == refused
    else:
        assert held == set(range(1, exported.sequence))
    # A second download holds the first one's event, and verifies too.
    again = downloaded(auditor.get(url.split("?")[0]), tmp_path, f"{name}-again.jsonl")
    assert standalone_verify(again).returncode == 0
    assert exported.sequence in sequences_in(again)


def test_a_tampered_download_is_refused(young_log, auditor, tmp_path):
    path = downloaded(auditor.get("/admin/audit/auditevent/export/"), tmp_path, "whole.jsonl")
    path.write_bytes(path.read_bytes().replace(b'"out_of_data"', b'"unread_words"', 1))
    refused = standalone_verify(path)
    assert refused.returncode != 0 and not refused.stdout.startswith("ok:")


def test_export_audit_verifies(young_log, tmp_path):
    path = tmp_path / "command.jsonl"
    with path.open("w") as out:
        call_command("export_audit", stdout=out, stderr=io.StringIO())
    assert standalone_verify(path).returncode == 0


def test_a_filter_that_holds_nothing_is_said_not_downloaded(young_log, auditor):
    answer = auditor.get("/admin/audit/auditevent/export/?outcome__exact=rate_limited", follow=True)
    assert b"holds no events" in answer.content
    api = auditor.get("/api/audit-events/export/?outcome=rate_limited")
    assert api.status_code == 400
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.AUDIT_EXPORTED).exists()
