"""The admin's "verify" button: a job for a worker, one at a time, incremental unless asked for
in full, and the full check rate-limited."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit import tasks
from audit.checkpoints import checkpoint_create_if_due
from audit.models import AuditEvent, ChainVerification
from audit.tasks import verify_chain_job
from tests.audit.test_checkpoints import _triggers_off, append

pytestmark = pytest.mark.django_db

VERIFY = "/admin/audit/auditevent/verify/"
CHANGELIST = "/admin/audit/auditevent/"


@pytest.fixture
def queued(monkeypatch):
    """The verification jobs published to the broker, by id."""
    published = []
    monkeypatch.setattr(
        tasks.verify_chain_job,
        "apply_async",
        lambda args, **options: published.append(args[0]),
    )
    return published


@pytest.fixture
def chain(settings):
    """300 events with signed checkpoints at #100, #200 and #300."""
    settings.AUDIT_CHECKPOINT_EVERY = 100
    settings.AUDIT_CHECKPOINT_SECONDS = 3600
    for start in (0, 100, 200):
        append(100, start)
        checkpoint_create_if_due()


def press(client, full=False):
    return client.post(VERIFY, {"full": "1"} if full else {}, follow=True)


def tamper(sequence: int) -> None:
    with _triggers_off(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET detail = 'rewritten' WHERE sequence = %s", [sequence]
        )


def age(seconds: float) -> None:
    """Every check was asked for `seconds` earlier than it was."""
    for check in ChainVerification.objects.all():
        ChainVerification.objects.filter(pk=check.pk).update(
            checked_at=check.checked_at - timedelta(seconds=seconds)
        )


def run_queued(queued) -> ChainVerification:
    verify_chain_job(queued[-1])  # what the worker runs
    return ChainVerification.objects.get(pk=queued[-1])


def test_pressing_verify_queues_one_job_and_reads_no_event(client, auditor, chain, queued):
    client.force_login(auditor)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(VERIFY)
    assert response.status_code == 302
    assert not [q for q in queries if "audit_auditevent" in q["sql"]]
    job = ChainVerification.objects.get()
    assert queued == [job.pk]
    assert (job.state, job.ok, job.requested_by) == ("queued", None, "auditor")


def test_a_second_press_within_a_minute_gets_the_running_job(client, auditor, chain, queued):
    client.force_login(auditor)
    press(client)
    body = press(client).content.decode()
    assert ChainVerification.objects.count() == 1 and len(queued) == 1
    assert "(대기 중)" in body  # the state of the job already asked for
    run_queued(queued)
    press(client)  # done, but within the minute: still that one
    assert ChainVerification.objects.count() == 1
    age(61)
    press(client)
    assert ChainVerification.objects.count() == 2 and len(queued) == 2


def test_the_result_appears_when_the_job_is_done(client, auditor, chain, queued):
    client.force_login(auditor)
    body = press(client).content.decode()
    assert 'id="chain-check"' in body and "체인이 온전합니다" not in body
    job = run_queued(queued)
    assert job.ok and job.state == "done" and job.verified_through == 300
    body = client.get(CHANGELIST).content.decode()
    assert "이벤트 300건을 확인했고 체인이 온전합니다." in body
    assert 'id="chain-check"' not in body


def test_an_incremental_check_starts_at_the_last_verified_checkpoint(
    client, auditor, chain, queued, settings
):
    client.force_login(auditor)
    press(client, full=True)
    assert run_queued(queued).events_checked == 300
    append(50, 300)  # #301–#350, after the last verified point (#300, checkpoint 3)
    age(61)
    press(client)
    job = run_queued(queued)
    assert job.ok and job.events_checked == 51, job.message  # #300 again, then the new ones
    assert "from signed checkpoint 3 (#300)" in job.message
    tamper(320)
    age(61)
    press(client)
    job = run_queued(queued)
    assert not job.ok and "event #320 was altered" in job.message
    body = client.get(CHANGELIST).content.decode()
    assert "event #320 was altered" in body


def test_an_altered_checkpointed_event_is_found_by_the_incremental_check(
    client, auditor, chain, queued
):
    """The event a check starts from is read again and must hash to what its checkpoint signs."""
    client.force_login(auditor)
    press(client)
    assert run_queued(queued).ok
    tamper(300)
    age(61)
    press(client)
    job = run_queued(queued)
    assert not job.ok and "event #300 was altered" in job.message


def test_the_full_check_is_rate_limited_and_the_incremental_one_is_not(
    client, auditor, chain, queued, settings
):
    settings.AUDIT_FULL_VERIFY_INTERVAL_SECONDS = 3600
    client.force_login(auditor)
    press(client, full=True)
    run_queued(queued)
    tamper(50)  # before the last verified point: only a full check reads it again
    age(300)
    body = press(client, full=True).content.decode()
    assert "전체 검증은" in body  # refused, with when it may be asked for again
    assert ChainVerification.objects.count() == 1 and len(queued) == 1
    press(client)  # the incremental check is not limited
    job = run_queued(queued)
    assert job.ok and not job.full
    age(7200)
    press(client, full=True)
    job = run_queued(queued)
    assert job.full and not job.ok and "event #50 was altered" in job.message
    assert AuditEvent.objects.get(sequence=50).detail == "rewritten"


def test_a_check_that_cannot_be_queued_says_so_and_does_not_count(
    client, auditor, chain, monkeypatch
):
    def broker_down(*args, **options):
        raise ConnectionRefusedError

    monkeypatch.setattr(tasks.verify_chain_job, "apply_async", broker_down)
    client.force_login(auditor)
    body = press(client, full=True).content.decode()
    assert "could not be queued (connectionrefusederror)" in body.lower()
    job = ChainVerification.objects.get()
    assert job.state == "done" and job.ok is None
    age(61)
    monkeypatch.undo()
    press(client, full=True)  # not refused as "too soon": the first never ran
    assert ChainVerification.objects.count() == 2


def test_a_check_whose_message_was_lost_is_run_by_the_sweep(client, auditor, chain, queued):
    client.force_login(auditor)
    press(client)
    queued.clear()  # the message went with a killed worker, or a Redis restarted empty
    assert verify_chain_job() is True  # beat's sweep: no id, the oldest check queued
    job = ChainVerification.objects.get()
    assert job.state == "done" and job.ok
    assert verify_chain_job() is None  # nothing left to run
