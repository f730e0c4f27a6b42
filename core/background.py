"""Background threads give way to the threads that serve requests.

A worker's audit writer and WAL checkpointer do real work, but nobody waits on it the way a
client waits on the event loop. At equal priority the kernel preempts the loop for them mid-
request, so on a busy core every batch costs the loop context switches and cold caches as well as
the batch itself. At a lower priority they run when the loop waits (under load, while requests
wait for their batch's commit) or on another core, and never starve: the loop's own requests
wait on the writer, so it gets the CPU as soon as the loop has nothing else to do.
"""

import logging
import os
import sys
import threading

from django.conf import settings

logger = logging.getLogger("hyperbook")


def lower_current_thread_priority() -> int | None:
    """Raise the calling thread's niceness by settings.BACKGROUND_THREAD_NICENESS.

    Returns the thread's niceness after the change, or None when it was left alone (the setting
    is 0, or not on Linux, where setpriority would apply to the whole process)."""
    step = settings.BACKGROUND_THREAD_NICENESS
    if step <= 0 or not sys.platform.startswith("linux"):
        return None
    thread_id = threading.get_native_id()  # Linux: a thread's own scheduling entity
    try:
        niceness = min(19, os.getpriority(os.PRIO_PROCESS, thread_id) + step)
        os.setpriority(os.PRIO_PROCESS, thread_id, niceness)
    except OSError as exc:  # e.g. a sandbox that forbids it: run at normal priority
        logger.warning("could not lower a background thread's priority (%s)", exc)
        return None
    return niceness
