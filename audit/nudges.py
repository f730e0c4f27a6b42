"""Nudges to the Celery workers ("deliver now", "sign a checkpoint"), sent off the request path.

A nudge is only a hint: the events it points at are already committed, and the periodic sweep
delivers whatever a lost nudge leaves pending. So no request waits for the broker: a nudge is
handed to one background thread per process, which publishes it once however many requests
asked meanwhile, without kombu's retries, and rests (1 s, doubling up to 30 s) after the broker
failed, dropping what it could not send.
"""

import logging
import os
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("hyperbook.audit")

FIRST_REST_SECONDS = 1.0
LONGEST_REST_SECONDS = 30.0


class Nudger:
    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # threads do not survive a fork

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wanted: dict[str, Callable[[], object]] = {}
        self._woken = threading.Event()
        self._thread: threading.Thread | None = None

    def nudge(self, name: str, publish: Callable[[], object]) -> None:
        """Have `publish` called soon, once for every nudge of this name asked until then."""
        with self._lock:
            self._wanted[name] = publish
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._publish_forever, name="audit-nudges", daemon=True
                )
                self._thread.start()
        self._woken.set()

    def _publish_forever(self) -> None:
        rest = 0.0
        while True:
            self._woken.wait()
            self._woken.clear()
            with self._lock:
                wanted, self._wanted = self._wanted, {}
            failed = False
            for name, publish in wanted.items():
                try:
                    publish()
                except Exception as exc:  # the broker is down: the sweep delivers instead
                    failed = True
                    logger.warning(
                        "audit: could not publish the %s nudge (%s); the sweep will catch up",
                        name,
                        type(exc).__name__,
                    )
            if failed:
                rest = min(max(rest * 2, FIRST_REST_SECONDS), LONGEST_REST_SECONDS)
                time.sleep(rest)  # nudges asked meanwhile wait, merged
            else:
                rest = 0.0


nudger = Nudger()
