"""The background WAL checkpointer (SQLite only): it copies the log back and stops when asked."""

import time

import pytest
from django.db import connection

from audit.services import audit_events_append
from core.sqlite_wal import WalCheckpointer

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_is_wanted_exactly_on_sqlite():
    assert WalCheckpointer.wanted() == (connection.vendor == "sqlite")


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite's WAL only")
def test_a_checkpoint_copies_every_committed_frame_back():
    audit_events_append(events=[{"action": "t", "outcome": "allowed"}] * 20)
    busy, frames, copied = WalCheckpointer().checkpoint()
    assert busy == 0 and frames > 0 and copied == frames


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite's WAL only")
def test_the_thread_checkpoints_until_stopped():
    results = []

    class Counting(WalCheckpointer):
        def checkpoint(self):
            results.append(super().checkpoint())
            return results[-1]

    audit_events_append(events=[{"action": "t", "outcome": "allowed"}] * 20)
    checkpointer = Counting(interval=0.02)
    checkpointer.start()
    try:
        deadline = time.monotonic() + 5
        while len(results) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        checkpointer.stop()
    assert not checkpointer._thread.is_alive()
    assert len(results) >= 2
    busy, frames, copied = results[0]
    assert busy == 0 and copied == frames > 0  # the first pass copied the appended events back
