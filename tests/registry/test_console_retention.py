"""The discovery console's history is kept CONSOLE_HISTORY_RETENTION_DAYS: a periodic task deletes
older turns, every admin's, and writes one audit event per run with counts and nothing of what
the turns held; the console page says how long; a person can still delete their own at once."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test.utils import override_settings
from django.utils import timezone

from audit.models import AuditEvent
from registry.models import ConsoleTurn
from registry.tasks import expire_console_history

pytestmark = pytest.mark.django_db

SECRET_PROMPT = "홍길동 010-5555-1234 고객의 계약"


def turn(user, days_ago: float) -> ConsoleTurn:
    made = ConsoleTurn.objects.create(
        user=user, kind="call", server_id="kb_mcp", prompt=SECRET_PROMPT, status="ok"
    )
    ConsoleTurn.objects.filter(pk=made.pk).update(
        created_at=timezone.now() - timedelta(days=days_ago)
    )
    return made


@override_settings(CONSOLE_HISTORY_RETENTION_DAYS=30)
def test_turns_past_the_period_are_deleted_for_every_admin_and_the_run_is_audited():
    alice, bob = User.objects.create_user("alice"), User.objects.create_user("bob")
    kept = {turn(alice, 1).pk, turn(bob, 29).pk}
    turn(alice, 31)
    turn(bob, 400)
    assert expire_console_history.apply().get() == 2
    assert set(ConsoleTurn.objects.values_list("pk", flat=True)) == kept
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.CONSOLE_HISTORY_EXPIRED)
    assert event.changes["deleted"] == 2 and event.changes["retention_days"] == 30
    assert "홍길동" not in repr(event.__dict__) and "010-5555" not in repr(event.__dict__)
    # Every run is on the record, even one with nothing to delete.
    assert expire_console_history.apply().get() == 0
    runs = AuditEvent.objects.filter(action=AuditEvent.Action.CONSOLE_HISTORY_EXPIRED)
    assert [e.changes["deleted"] for e in runs.order_by("sequence")] == [2, 0]


def test_the_task_runs_on_a_schedule():
    entry = settings.CELERY_BEAT_SCHEDULE["console-history-retention"]
    assert entry["task"] == expire_console_history.name
    assert entry["schedule"] <= 24 * 3600


@override_settings(CONSOLE_HISTORY_RETENTION_DAYS=7, LANGUAGE_CODE="en")
def test_the_console_page_states_the_period(admin_client):
    page = admin_client.get("/admin/registry/consoleturn/", HTTP_ACCEPT_LANGUAGE="en")
    assert page.status_code == 200
    assert "kept for 7 days" in page.content.decode()
