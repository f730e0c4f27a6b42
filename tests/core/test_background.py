"""Background threads (the audit writer, the WAL checkpointer) run below request handling."""

import asyncio
import os
import sys
import threading
import time

import pytest

from audit.writer import AuditWriter
from core.background import lower_current_thread_priority
from core.sqlite_wal import WalCheckpointer

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="per-thread priority is a Linux feature"
)


def niceness(native_id: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, native_id)


def in_new_thread(function):
    """Run `function` in a fresh thread; returns (its result, the thread's niceness after)."""
    seen = {}

    def run():
        seen["result"] = function()
        seen["niceness"] = niceness(threading.get_native_id())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    return seen["result"], seen["niceness"]


def test_the_calling_thread_alone_is_lowered(settings):
    settings.BACKGROUND_THREAD_NICENESS = 7
    before = niceness(threading.get_native_id())
    result, after = in_new_thread(lower_current_thread_priority)
    assert result == after == min(19, before + 7)
    assert niceness(threading.get_native_id()) == before  # not the process, not this thread


def test_niceness_never_goes_past_19(settings):
    settings.BACKGROUND_THREAD_NICENESS = 19
    before = niceness(threading.get_native_id())

    def twice():
        return lower_current_thread_priority(), lower_current_thread_priority()

    result, after = in_new_thread(twice)
    assert result == (min(19, before + 19), 19)
    assert after == 19


def test_zero_leaves_the_thread_at_the_workers_priority(settings):
    settings.BACKGROUND_THREAD_NICENESS = 0
    before = niceness(threading.get_native_id())
    result, after = in_new_thread(lower_current_thread_priority)
    assert result is None
    assert after == before


@pytest.mark.django_db(transaction=True)
def test_the_audit_writer_thread_runs_lowered(settings):
    settings.BACKGROUND_THREAD_NICENESS = 5
    base = niceness(threading.get_native_id())
    writer = AuditWriter()
    try:
        asyncio.run(writer.record({"action": "mcp.tools_list", "outcome": "allowed"}))
        assert niceness(writer._thread.native_id) == min(19, base + 5)
    finally:
        writer.close()


@pytest.mark.django_db(transaction=True)
def test_the_checkpointer_thread_runs_lowered(settings):
    settings.BACKGROUND_THREAD_NICENESS = 4
    base = niceness(threading.get_native_id())
    checkpointer = WalCheckpointer(interval=30)
    checkpointer.start()
    try:
        deadline = time.monotonic() + 5
        while niceness(checkpointer._thread.native_id) == base and time.monotonic() < deadline:
            time.sleep(0.01)
        assert niceness(checkpointer._thread.native_id) == min(19, base + 4)
    finally:
        checkpointer.stop()
