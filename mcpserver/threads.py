"""Database work called from the event loop, run in worker threads."""

from asgiref.sync import sync_to_async
from django.db import close_old_connections


def in_db_thread(function):
    """`function` as a coroutine function, each call in a thread of the pool rather than Django's
    one shared thread, so that a slow query never queues the requests behind it. Connections
    past their age or broken are closed before and after, as Django does around a request."""

    def run(*args):
        close_old_connections()
        try:
            return function(*args)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=False)
