"""Signed checkpoints: when they are made, what they sign, how they are checked and anchored."""

import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from audit import merkle
from audit.chain import event_hash
from audit.checkpoints import (
    checkpoint_create_if_due,
    checkpoint_memory_id,
    configured_verifiers,
    current_signer,
)
from audit.delivery import deliver_pending
from audit.memory_api import memory_for_checkpoint
from audit.models import (
    AuditCheckpoint,
    AuditEvent,
    ChainHead,
    CheckpointDelivery,
    DeliveryAlarm,
    SigningKey,
)
from audit.reconciliation import reconcile_with_memory_api
from audit.services import audit_events_append
from audit.signed_note import Checkpoint, NoteError, Signer, open_checkpoint, split_note
from audit.verification import verify_chain
from tests.audit.memory_sink import MemorySink

SERVICE_TOKEN = "svc-credential-for-checkpoint-tests-0123456789"


def append(n: int, start: int = 0) -> None:
    audit_events_append(
        events=[
            {"action": "mcp.tools_list", "outcome": "allowed", "detail": f"event {start + i}"}
            for i in range(n)
        ]
    )


def head() -> ChainHead:
    return ChainHead.objects.get(source="hyperbook")


def tree_root_of_events() -> str:
    """The RFC 6962 root over every event's chain hash, computed from the events alone."""
    hashes = AuditEvent.objects.order_by("sequence").values_list("hash", flat=True)
    return merkle.root_of(merkle.leaf_hash(bytes.fromhex(h)) for h in hashes).hex()


@pytest.fixture
def every_100(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 100
    settings.AUDIT_CHECKPOINT_SECONDS = 3600
    return settings


@pytest.mark.django_db
def test_no_checkpoint_without_events_and_the_first_comes_at_once(every_100):
    assert checkpoint_create_if_due() is None
    append(3)
    checkpoint = checkpoint_create_if_due()
    assert (checkpoint.number, checkpoint.sequence) == (1, 3)
    assert (checkpoint.hash, checkpoint.head_hash) == (tree_root_of_events(), head().last_hash)
    assert checkpoint_create_if_due() is None  # nothing new since
    append(1)
    assert checkpoint_create_if_due() is None  # new, but neither 100 events nor an hour


@pytest.mark.django_db
def test_a_checkpoint_is_due_after_so_many_events_or_so_long(every_100):
    append(1)
    first = checkpoint_create_if_due()
    append(99)
    assert checkpoint_create_if_due() is None  # 99 new events
    append(1)
    second = checkpoint_create_if_due()
    assert (second.number, second.sequence, second.prev_hash) == (2, 101, first.hash)
    append(1)
    later = timezone.now() + timedelta(seconds=3600)
    third = checkpoint_create_if_due(now=later)
    assert (third.number, third.sequence) == (3, 102)


@pytest.mark.django_db
def test_the_signed_note_says_what_the_row_says_and_verifies_with_the_printed_key(every_100):
    append(5)
    checkpoint = checkpoint_create_if_due()
    out = io.StringIO()
    call_command("audit_verifier_key", stdout=out)
    printed = out.getvalue().strip()
    from audit.signed_note import Verifier

    signed = open_checkpoint(checkpoint.note, [Verifier.from_text(printed)])
    assert signed == Checkpoint("test.hyperbook.invalid/audit/hyperbook", 5, tree_root_of_events())
    assert checkpoint.key_id == printed.split("+")[1]
    assert checkpoint.id == checkpoint_memory_id(checkpoint.origin, 1)
    # The key is recorded, public half only; the signer key never appears in what is stored.
    key = SigningKey.objects.get()
    assert key.verifier_key == printed
    assert "PRIVATE" not in checkpoint.note and current_signer().text() not in printed


@pytest.mark.django_db
def test_checkpoints_are_append_only(every_100):
    append(1)
    checkpoint = checkpoint_create_if_due()
    with pytest.raises(TypeError):
        checkpoint.save()
    with pytest.raises(TypeError):
        AuditCheckpoint.objects.filter(pk=checkpoint.pk).update(sequence=9)
    with pytest.raises(Exception, match="append-only"):  # the database's own trigger
        with connection.cursor() as cursor:
            cursor.execute("UPDATE audit_auditcheckpoint SET sequence = 9")


@pytest.mark.django_db
def test_verify_chain_checks_the_stored_checkpoints(every_100):
    append(10)
    checkpoint_create_if_due()
    report = verify_chain()
    assert report.ok and report.checkpoints_checked == 1, report.message
    # A checkpoint signed by a key nobody configured is refused, and named.
    other = Signer.generate("intruder.example/audit")
    with _triggers_off():
        with connection.cursor() as cursor:
            forged = other.sign(
                Checkpoint("test.hyperbook.invalid/audit/hyperbook", 10, "ab" * 32).body()
            )
            cursor.execute("UPDATE audit_auditcheckpoint SET note = %s", [forged])
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == 10
    assert "unknown keys" in report.message and "intruder.example/audit" in report.message


@pytest.mark.django_db
def test_a_rotated_key_stays_trusted_when_listed(every_100, settings):
    append(2)
    checkpoint_create_if_due()
    old = current_signer().verifier.text()
    settings.AUDIT_SIGNING_KEY = Signer.generate("test.hyperbook.invalid/audit").text()
    append(100)
    assert checkpoint_create_if_due().number == 2  # signed by the new key
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == 2  # the old key is not trusted
    settings.AUDIT_VERIFIER_KEYS = [old]
    assert verify_chain().ok
    assert len(configured_verifiers()) == 2
    assert SigningKey.objects.count() == 2  # both stay listed
    out = io.StringIO()
    call_command("audit_verifier_key", "--all", stdout=out)
    assert out.getvalue().split() == [v.text() for v in configured_verifiers()]


def rotate(settings) -> tuple[str, str, Signer]:
    """Checkpoint 1 (#2) by the old key, 2 (#102) by the new one, the old one still trusted.
    Returns (the old signer key, its verifier key, the new signer)."""
    append(2)
    checkpoint_create_if_due()
    old_signer, old = settings.AUDIT_SIGNING_KEY, current_signer().verifier.text()
    new = Signer.generate("test.hyperbook.invalid/audit")
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_VERIFIER_KEYS = new.text(), [old]
    append(100)
    checkpoint_create_if_due()
    return old_signer, old, new


def signed_again_by_the_old_key(settings, old_signer: str, new: Signer) -> int:
    """The old key's private half (a host left on it, or a copy someone kept) signs the next
    checkpoint; then the deployment is as it was. Returns the size it signed."""
    trusted = settings.AUDIT_VERIFIER_KEYS
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_VERIFIER_KEYS = old_signer, [new.verifier.text()]
    append(100)
    size = checkpoint_create_if_due().sequence
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_VERIFIER_KEYS = new.text(), trusted
    return size


@pytest.mark.django_db
def test_a_key_retired_in_the_admin_signs_nothing_beyond_its_last_checkpoint(every_100, client):
    old_signer, old, new = rotate(every_100)
    root = User.objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(root)
    key = SigningKey.objects.get(verifier_key=old)
    response = client.post(f"/admin/audit/auditcheckpoint/keys/{key.pk}/retire/")
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.retired_at is not None and key.last_size == 2
    event = AuditEvent.objects.get(action="audit.signing_key_retired")
    assert (event.actor, event.changes["after"]) == ("root", {"retired": True, "last_size": 2})
    assert verify_chain().ok
    size = signed_again_by_the_old_key(every_100, old_signer, new)
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == size
    assert "retired after #2" in report.message
    page = client.get("/admin/audit/auditcheckpoint/").content.decode()
    assert f"{old}@2" in page  # what to give `python -m audit.verify` for it
    out = io.StringIO()
    call_command("audit_verifier_key", "--all", stdout=out)
    assert f"{old}@2" in out.getvalue().split()


@pytest.mark.django_db
def test_a_key_listed_with_its_last_size_signs_nothing_beyond_it(every_100):
    old_signer, old, new = rotate(every_100)
    size = signed_again_by_the_old_key(every_100, old_signer, new)
    assert verify_chain().ok  # listed without a range, the old key signs for any sequence
    every_100.AUDIT_VERIFIER_KEYS = [f"{old}@2"]
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == size
    assert "retired after #2" in report.message


@pytest.mark.django_db
def test_only_a_superuser_retires_a_key_and_never_the_current_one(every_100, client, auditor):
    append(2)
    checkpoint_create_if_due()
    current = SigningKey.objects.get()
    client.force_login(auditor)
    assert client.post(f"/admin/audit/auditcheckpoint/keys/{current.pk}/retire/").status_code == 403
    client.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))
    client.post(f"/admin/audit/auditcheckpoint/keys/{current.pk}/retire/")
    current.refresh_from_db()
    assert current.retired_at is None and current.last_size is None


@pytest.mark.django_db
def test_a_tail_deleted_with_its_checkpoints_is_found_only_against_the_anchor(every_100):
    with MemorySink(SERVICE_TOKEN) as sink:
        _chain_with_anchored_checkpoints(every_100, sink)
        assert reconcile_with_memory_api().ok
        # The adversary deletes events #401.. and the checkpoints over them, and rewinds the head.
        with _triggers_off():
            cut = AuditEvent.objects.get(sequence=400)
            _delete_checkpoints_after(400)
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM audit_delivery WHERE sequence > 400")
                cursor.execute("DELETE FROM audit_auditevent WHERE sequence > 400")
                cursor.execute(
                    "UPDATE audit_chainhead SET last_sequence = 400, last_hash = %s", [cut.hash]
                )
        assert verify_chain().ok  # the chain alone still looks intact
        report = reconcile_with_memory_api()
        assert not report.ok
        assert report.first_bad_sequence == 401
        assert "ends at #400" in report.message and "rewound" in report.message
        with pytest.raises(CommandError, match="rewound"):
            call_command("verify_audit_chain", "--against-memory-api", stdout=io.StringIO())


@pytest.mark.django_db
def test_a_chain_rewritten_from_300_is_found_only_against_the_anchor(every_100):
    with MemorySink(SERVICE_TOKEN) as sink:
        _chain_with_anchored_checkpoints(every_100, sink)
        anchored = {c.number: c.sequence for c in AuditCheckpoint.objects.all()}
        # The adversary changes #300 and re-chains everything after it, recomputing each hash.
        with _triggers_off():
            _delete_checkpoints_after(299)
            rows = list(AuditEvent.objects.filter(sequence__gte=299).order_by("sequence").values())
            previous = rows[0]["hash"]
            with connection.cursor() as cursor:
                for row in rows[1:]:
                    if row["sequence"] == 300:
                        row["detail"] = "nothing to see"
                    row["prev_hash"] = previous
                    row["hash"] = previous = event_hash(row)
                    cursor.execute(
                        "UPDATE audit_auditevent SET detail = %s, prev_hash = %s, hash = %s "
                        "WHERE sequence = %s",
                        [row["detail"], row["prev_hash"], row["hash"], row["sequence"]],
                    )
                cursor.execute("UPDATE audit_chainhead SET last_hash = %s", [previous])
        assert verify_chain().ok  # recomputed hashes: the chain alone cannot tell
        report = reconcile_with_memory_api()
        assert not report.ok
        last_good = max(seq for seq in anchored.values() if seq < 300)
        assert report.first_bad_sequence == last_good + 1 <= 300
        assert f"up to event #{last_good}" in report.message


@pytest.mark.django_db
def test_the_anchor_check_fails_closed(every_100, settings):
    settings.EGS2_MEMORY_API_URL = ""
    assert not reconcile_with_memory_api().ok
    with MemorySink(SERVICE_TOKEN) as sink:
        settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
        append(3)
        report = reconcile_with_memory_api()  # events, but nothing anchored yet
        assert not report.ok and "no checkpoint" in report.message
        checkpoint_create_if_due()
        deliver_pending()
        assert reconcile_with_memory_api().ok
        # The Memory API's copy is not signed by us: it is refused, never believed.
        memory = sink.memories[
            str(checkpoint_memory_id("test.hyperbook.invalid/audit/hyperbook", 1))
        ]
        text, _ = split_note(memory["content"]["note"])
        memory["content"]["note"] = Signer.generate("x.example/audit").sign(text)
        report = reconcile_with_memory_api()
        assert not report.ok and "does not verify" in report.message
        settings.EGS2_MEMORY_API_TOKEN = "wrong-credential-0123456789"
        report = reconcile_with_memory_api()
        assert not report.ok and "could not be read" in report.message


@pytest.mark.django_db
def test_checkpoints_are_delivered_as_their_own_kind(every_100, settings):
    with MemorySink(SERVICE_TOKEN) as sink:
        settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
        append(4)
        checkpoint = checkpoint_create_if_due()
        report = deliver_pending()
        assert (report.delivered, report.checkpoints_delivered) == (4, 1)
        memory = sink.memories[str(checkpoint.id)]
        assert memory["kind"] == "audit_checkpoint"
        assert memory["namespace"] == "hyperbook.audit"
        assert (memory["sequence"], memory["hash"]) == (4, checkpoint.hash)
        assert memory["content"]["note"] == checkpoint.note
        assert CheckpointDelivery.objects.get().state == "delivered"
        assert deliver_pending().checkpoints_delivered == 0  # once


@pytest.mark.django_db
def test_a_duplicate_answer_is_delivered_only_when_the_copy_held_is_ours(every_100, settings):
    with MemorySink(SERVICE_TOKEN) as sink:
        settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
        append(4)
        checkpoint = checkpoint_create_if_due()
        sink.memories[str(checkpoint.id)] = memory_for_checkpoint(checkpoint)  # sent before
        assert deliver_pending().checkpoints_delivered == 1
        assert sink.reads == [str(checkpoint.id)]  # compared, not taken on trust
        assert CheckpointDelivery.objects.get().state == "delivered"


@pytest.mark.django_db
def test_a_copy_re_signed_by_someone_else_raises_an_alarm_never_delivered(
    every_100, settings, client, auditor
):
    with MemorySink(SERVICE_TOKEN) as sink:
        settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
        append(4)
        checkpoint = checkpoint_create_if_due()
        forger = Signer.generate("test.hyperbook.invalid/audit")
        forged = memory_for_checkpoint(checkpoint)
        forged["content"]["note"] = forger.sign(
            Checkpoint(checkpoint.origin, checkpoint.sequence, checkpoint.hash).body()
        )
        sink.memories[str(checkpoint.id)] = forged
        report = deliver_pending()
        assert (report.delivered, report.checkpoints_delivered) == (4, 0)
        assert deliver_pending().checkpoints_delivered == 0  # the next sweep does not take it
    delivery = CheckpointDelivery.objects.get()
    assert delivery.state == "rejected" and "different copy" in delivery.last_error
    health = client.get("/healthz").json()
    assert "checkpoint_conflict" in health["degraded"]
    assert health["delivery"]["checkpoint_conflicts"] == 1
    client.force_login(auditor)
    page = client.get("/admin/audit/auditevent/").content.decode()
    assert f"checkpoint {checkpoint.number} (hyperbook, #4)" in page
    # The chain reads intact here, but the anchor outside our database holds another copy.
    out = io.StringIO()
    with pytest.raises(CommandError, match="^not verified: 1 checkpoint conflict alarm open"):
        call_command("verify_audit_chain", stdout=out)
    assert "chain intact" not in out.getvalue()
    DeliveryAlarm.objects.update(cleared_at=timezone.now())  # an operator looked into it
    call_command("verify_audit_chain", stdout=out)
    assert "4 events, chain intact" in out.getvalue()


def _chain_with_anchored_checkpoints(settings, sink: MemorySink) -> None:
    settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN = sink.url, SERVICE_TOKEN
    for batch in range(10):
        append(50, start=batch * 50)
        checkpoint_create_if_due()
    assert AuditCheckpoint.objects.count() >= 5
    report = deliver_pending()
    assert report.checkpoints_delivered == AuditCheckpoint.objects.count()
    assert verify_chain().ok


def _delete_checkpoints_after(sequence: int) -> None:
    doomed = list(
        AuditCheckpoint.objects.filter(sequence__gt=sequence).values_list("pk", flat=True)
    )
    with connection.cursor() as cursor:
        for pk in doomed:
            key = pk.hex if connection.vendor == "sqlite" else pk  # how each stores a UUID
            cursor.execute("DELETE FROM audit_checkpointdelivery WHERE checkpoint_id = %s", [key])
            cursor.execute("DELETE FROM audit_auditcheckpoint WHERE id = %s", [key])


class _triggers_off:
    """What an adversary with the database's owner rights does: the append-only triggers go
    (inside the test's transaction, so they are back afterwards)."""

    def __enter__(self):
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SET LOCAL session_replication_role = replica")
            else:
                cursor.execute("DROP TRIGGER IF EXISTS audit_event_no_update")
                cursor.execute("DROP TRIGGER IF EXISTS audit_checkpoint_no_update")

    def __exit__(self, *exc):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL session_replication_role = origin")


def test_a_forged_note_never_opens():
    signer = Signer.generate("example.org/audit")
    note = signer.sign(Checkpoint("example.org/audit/hyperbook", 7, "cd" * 32).body())
    forged = note.replace("\n7\n", "\n8\n")
    with pytest.raises(NoteError, match="does not verify"):
        open_checkpoint(forged, [signer.verifier])
    assert json.loads(json.dumps(note)) == note  # plain text, safe in a JSON line


def test_a_bad_signer_key_is_reported_at_start_up_without_showing_it(settings):
    from audit.apps import checkpoint_keys_check

    assert checkpoint_keys_check(None) == []
    settings.AUDIT_SIGNING_KEY = "PRIVATE+KEY+x+00000000+c2VjcmV0LXNlY3JldC1zZWNyZXQ="
    errors = checkpoint_keys_check(None)
    assert [e.id for e in errors] == ["audit.E001"]
    assert "c2VjcmV0" not in errors[0].msg
    settings.AUDIT_SIGNING_KEY, settings.AUDIT_VERIFIER_KEYS = "", []
    assert "is not set" in checkpoint_keys_check(None)[0].msg


@pytest.mark.parametrize("size", ["٣", "²", "03", "-1", " 3"])
def test_a_checkpoint_size_is_ascii_decimal(size):
    from audit.signed_note import parse_checkpoint

    with pytest.raises(NoteError):
        parse_checkpoint(f"example.org/audit\n{size}\n{'A' * 43}=\n")


@pytest.mark.django_db(transaction=True)  # the ask is made after each commit
def test_appends_ask_for_a_checkpoint_every_so_many_events(every_100, monkeypatch):
    from audit import tasks

    asked = []
    monkeypatch.setattr(tasks, "_checkpoint_requested_at_sequence", 0)
    monkeypatch.setattr(tasks.nudger, "nudge", lambda name, publish: publish())
    monkeypatch.setattr(
        tasks.create_checkpoint,
        "apply_async",
        lambda **options: asked.append(head().last_sequence),
    )
    append(60)
    append(39)
    assert asked == []  # 99 events
    append(1)
    append(50)
    assert asked == [100]
    append(60)
    assert asked == [100, 210]
