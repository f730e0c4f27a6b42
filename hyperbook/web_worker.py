"""The web server's worker class (config/gunicorn.conf.py): uvicorn's, with a deadline for reading
a request and a cap on connections, so that slow or half-sent requests cannot hold a worker.

uvicorn 0.54's h11 protocol has a keep-alive timeout between requests but none while a request
is being read: a client that sends its headers a byte at a time, or never finishes its body, is
held for ever. Here a request must be read whole within WEB_REQUEST_READ_TIMEOUT_SECONDS of its
first byte (or of the connection, for one that sends nothing); else the connection is closed.
Past gunicorn's `worker_connections` open connections, uvicorn answers 503.
"""

import os

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn_worker import UvicornWorker

REQUEST_READ_TIMEOUT_SECONDS = float(os.environ.get("WEB_REQUEST_READ_TIMEOUT_SECONDS") or 10)


class DeadlineH11Protocol(H11Protocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._start_reading()

    def data_received(self, data: bytes) -> None:
        self._start_reading()
        super().data_received(data)
        if self._request_read_whole():
            self._stop_reading()

    def connection_lost(self, exc) -> None:
        self._stop_reading()
        super().connection_lost(exc)

    def _request_read_whole(self) -> bool:
        return self.conn.their_state not in (h11.IDLE, h11.SEND_BODY)

    def _start_reading(self) -> None:
        if self._read_deadline is None and not self._request_read_whole():
            self._read_deadline = self.loop.call_later(
                REQUEST_READ_TIMEOUT_SECONDS, self._read_too_slow
            )

    def _stop_reading(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_too_slow(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection whose request was not read in time")
            self.transport.close()


class Worker(UvicornWorker):
    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "http": DeadlineH11Protocol}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.config.limit_concurrency = self.cfg.worker_connections
        # A stop waits this long for requests in flight, as gunicorn's own workers do.
        self.config.timeout_graceful_shutdown = self.cfg.graceful_timeout
