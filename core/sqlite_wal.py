"""SQLite: checkpoint the write-ahead log from a background thread.

Every /mcp request commits an audit event. Left to SQLite, the commit that fills the WAL to its
threshold copies it back into the database file and fsyncs it, so now and then one batch of
requests waits tens of milliseconds for the disk. A passive checkpoint from another connection
runs beside the writer instead (SQLite allows one checkpointer next to one writer), keeping the
WAL short for readers and the fsync off the request path. The automatic checkpoint stays on as a
safety net, should this thread stop.
"""

import logging
import threading

from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from core.background import lower_current_thread_priority

logger = logging.getLogger("hyperbook.db")

CHECKPOINT_INTERVAL_S = 1.0


class WalCheckpointer:
    def __init__(self, *, interval: float = CHECKPOINT_INTERVAL_S, using: str = DEFAULT_DB_ALIAS):
        self.interval = interval
        self.using = using
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def wanted(using: str = DEFAULT_DB_ALIAS) -> bool:
        return connections[using].vendor == "sqlite"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def checkpoint(self) -> tuple[int, int, int]:
        """(busy, WAL frames, frames copied back): SQLite's answer to PRAGMA wal_checkpoint."""
        with connections[self.using].cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return tuple(cursor.fetchone())

    def _run(self) -> None:
        lower_current_thread_priority()
        try:
            while not self._stop.wait(self.interval):
                close_old_connections()
                try:
                    self.checkpoint()
                except Exception:  # the automatic checkpoint still bounds the WAL
                    logger.warning("sqlite: background WAL checkpoint failed", exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only
