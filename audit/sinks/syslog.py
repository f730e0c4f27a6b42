"""Audit events to a syslog receiver (rsyslog, syslog-ng, a SIEM's collector): one RFC 5424 message
per event carrying the event as OCSF JSON, over TCP (RFC 6587 octet counting) or TLS (RFC 5425).

Settings (django.conf.settings):

- AUDIT_SYSLOG_ADDRESS: the receiver's "host:port" ("[::1]:6514" for IPv6); unset: disabled.
- AUDIT_SYSLOG_TLS (False): speak TLS (RFC 5425); the receiver's certificate and name are checked.
- AUDIT_SYSLOG_CA_FILE (None): the CA certificates (PEM) to check it with; None: the system's.
- AUDIT_SYSLOG_TIMEOUT_SECONDS (10): the most one batch may take, from connecting to confirmation.
- AUDIT_SYSLOG_APP_NAME ("hyperbook"): the messages' APP-NAME.
- AUDIT_SYSLOG_MAX_MESSAGE_BYTES (8096: what a stock rsyslog takes, its maxMessageSize "8k"): the
  largest message sent, never more than the receiver's limit. rsyslog cuts a longer message and
  by default delivers the rest as a second one: two broken records, and no error the sender can
  see. So an event over the limit is not sent at all: it is left out of the acknowledged ids (it
  stays undelivered, in the backlog auditors see) and logged as an error naming it. A security
  team would rather be told of a gap than hold a record whose hash no longer recomputes; the
  operator raises both limits together.
- AUDIT_SYSLOG_MAX_BATCH_BYTES (1 MiB): the most one connection carries; the events past it are
  left unacknowledged for the next batch.

A message: PRI is facility 13 (log audit), the one RFC 5424 names for audit records, so that a
receiver can route them apart from the host's authentication log (10, authpriv: sshd, sudo);
severity 6 (informational) for what was allowed, changed or declined as the protocol allows,
5 (notice) for a question the tool refused, 4 (warning) for a refused request or a flood summary,
3 (err) for a failure. TIMESTAMP is when the event occurred, MSGID its action (cut to 32
characters; the whole action is in the JSON), STRUCTURED-DATA
`[hyperbook@32473 source=… sequence=… hash=… event_id=…]` (32473: the documentation enterprise
number, RFC 5612), and MSG a BOM and the compact OCSF JSON (audit.export.ocsf_event: the event as
exported, chain fields and all, in `unmapped`). JSON escapes every control character, so no
message holds a raw newline; the octet count frames it whatever it holds.

Acknowledgement. Syslog over TCP has no reply, and what the kernel took is lost if the receiver
dies before reading it. So each batch has a connection of its own: send every frame, end our side
(TLS: close_notify), and count the batch delivered only when the receiver has ended its side in
answer and its kernel has acknowledged every byte we sent. rsyslog's imtcp reads until our end of
stream and queues what it read before it reads on, so its close comes after the whole batch is in
its queue. A receiver that closes with our bytes unread resets the connection; one that closes
with nothing left to read while more of ours is on its way ends its stream cleanly, and only the
unacknowledged bytes tell (`wait_acknowledged`). Any error, reset or timeout first raises
SinkUnavailable and the engine sends the batch again: a receiver may get an event twice, and
de-duplicates by the OCSF `metadata.uid` (the event id; `sequence` and `hash` identify it too).

What no TCP syslog sender can see: a receiver killed (SIGKILL, a crash) after reading a batch and
before queueing it closes just as one that queued it. A stop (SIGTERM) loses nothing. Closing
that window takes an acknowledgement from the receiving program itself: RELP (rsyslog's imrelp
answers each message once queued).

rsyslog settings for this sink (tests/audit/test_syslog_sink.py runs with them):

    global(maxMessageSize="64k")   # at least AUDIT_SYSLOG_MAX_MESSAGE_BYTES (stock: 8096 bytes)
    module(load="imtcp")           # TLS: streamDriver.name="gtls" streamDriver.mode="1" and the
                                   # defaultNetstreamDriver{CA,Cert,Key}File globals
    input(type="imtcp" port="514" ruleset="hyperbook")
    ruleset(name="hyperbook" queue.type="Disk" queue.fileName="hyperbook"
            queue.checkpointInterval="1" queue.syncQueueFiles="on") { action(…) }

The queue on disk, its bookkeeping written with every message, keeps what rsyslog has queued
(and so confirmed) through its own crash or a power cut; a queue in memory loses it, and one with
queue.fileName and queue.saveOnShutdown="on" keeps it through restarts only. imtcp's
maxFrameSize (200000) must stay above the largest message.
"""

import fcntl
import logging
import re
import socket
import ssl
import struct
import sys
import termios
import time
from dataclasses import dataclass

import orjson
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from audit.export import ocsf_event
from audit.models import AuditEvent
from audit.sinks.base import SinkUnavailable

# Linux's SIOCOUTQ on a TCP socket: the bytes sent that the peer has not acknowledged yet.
SIOCOUTQ = termios.TIOCOUTQ if sys.platform == "linux" else None

logger = logging.getLogger("hyperbook.audit")

FACILITY_LOG_AUDIT = 13
SD_ID = "hyperbook@32473"
BOM = b"\xef\xbb\xbf"
MAX_REPLY_BYTES = 65536  # a syslog receiver sends nothing; one that does is not one
Outcome = AuditEvent.Outcome
SEVERITIES = {
    Outcome.ALLOWED: 6,
    Outcome.CHANGED: 6,
    Outcome.NOT_OFFERED: 6,
    Outcome.REFUSED: 5,
    Outcome.UNAUTHENTICATED: 4,
    Outcome.FORBIDDEN: 4,
    Outcome.REFUSED_ORIGIN: 4,
    Outcome.REFUSED_HOST: 4,
    Outcome.RATE_LIMITED: 4,
    Outcome.MALFORMED: 4,
    Outcome.TOO_LARGE: 4,
    Outcome.SUMMARY: 4,  # a flood of refusals over the recording budget
    Outcome.TOOL_ERROR: 3,
    Outcome.ERROR: 3,
}
DEFAULT_SEVERITY = 5  # an outcome added later is noticed, not lost among the informational
_NOT_PRINTUSASCII = re.compile(r"[^\x21-\x7e]")
_SD_ESCAPED = re.compile(r'(["\\\]])')


@dataclass(frozen=True)
class SyslogConfig:
    host: str
    port: int
    tls: bool = False
    ca_file: str | None = None
    timeout: float = 10.0
    app_name: str = "hyperbook"
    max_message_bytes: int = 8096
    max_batch_bytes: int = 1 << 20

    @classmethod
    def from_settings(cls) -> "SyslogConfig":
        address = getattr(settings, "AUDIT_SYSLOG_ADDRESS", None) or ""
        host, _, port = address.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not host or not port.isdigit():
            raise ImproperlyConfigured("AUDIT_SYSLOG_ADDRESS must be host:port")
        return cls(
            host=host,
            port=int(port),
            tls=bool(getattr(settings, "AUDIT_SYSLOG_TLS", False)),
            ca_file=getattr(settings, "AUDIT_SYSLOG_CA_FILE", None) or None,
            timeout=float(getattr(settings, "AUDIT_SYSLOG_TIMEOUT_SECONDS", 10)),
            app_name=getattr(settings, "AUDIT_SYSLOG_APP_NAME", "hyperbook"),
            max_message_bytes=int(getattr(settings, "AUDIT_SYSLOG_MAX_MESSAGE_BYTES", 8096)),
            max_batch_bytes=int(getattr(settings, "AUDIT_SYSLOG_MAX_BATCH_BYTES", 1 << 20)),
        )


class SyslogSink:
    """The Sink (audit.sinks.base) that writes to a syslog receiver, configured by settings."""

    name = "syslog"

    def enabled(self) -> bool:
        return bool(getattr(settings, "AUDIT_SYSLOG_ADDRESS", None))

    def deliver(self, events: list[dict]) -> set[str]:
        config = SyslogConfig.from_settings()
        frames, ids = batch_frames(events, config, hostname=socket.gethostname())
        if not frames:
            return set()
        try:
            exchange(config, b"".join(frames))
        except OSError as error:  # ssl.SSLError and TimeoutError are OSErrors too
            raise SinkUnavailable(f"syslog {config.host}:{config.port}: {error}") from error
        return ids


def batch_frames(
    events: list[dict], config: SyslogConfig, *, hostname: str
) -> tuple[list[bytes], set[str]]:
    """The frames of the events that fit this batch (in order, up to max_batch_bytes), and their
    ids; an event whose message is over max_message_bytes is logged and left out."""
    frames: list[bytes] = []
    ids: set[str] = set()
    size = 0
    for record in events:
        message = syslog_message(record, hostname=hostname, app_name=config.app_name)
        if len(message) > config.max_message_bytes:
            logger.error(
                "audit event %s (#%s) not sent to syslog: its message is %d bytes, over "
                "AUDIT_SYSLOG_MAX_MESSAGE_BYTES (%d)",
                record["id"],
                record["sequence"],
                len(message),
                config.max_message_bytes,
            )
            continue
        frame = b"%d %s" % (len(message), message)
        if frames and size + len(frame) > config.max_batch_bytes:
            break
        frames.append(frame)
        ids.add(record["id"])
        size += len(frame)
    return frames, ids


def syslog_message(record: dict, *, hostname: str, app_name: str) -> bytes:
    """One exported event as an RFC 5424 message (without its frame)."""
    pri = FACILITY_LOG_AUDIT * 8 + SEVERITIES.get(record["outcome"], DEFAULT_SEVERITY)
    header = " ".join(
        (
            f"<{pri}>1",
            record["occurred_at"],  # RFC 3339 in UTC, microseconds: what RFC 5424 allows
            printable(hostname, 255),
            printable(app_name, 48),
            "-",
            printable(record["action"], 32),
        )
    )
    params = {
        "source": record["source"],
        "sequence": record["sequence"],
        "hash": record["hash"],
        "event_id": record["id"],
    }
    data = " ".join(f'{name}="{sd_escaped(str(value))}"' for name, value in params.items())
    head = f"{header} [{SD_ID} {data}] ".encode()
    return head + BOM + orjson.dumps(ocsf_event(record))


def printable(text: str, limit: int) -> str:
    """`text` as a header field: PRINTUSASCII only, at most `limit` long, "-" when empty."""
    return _NOT_PRINTUSASCII.sub("_", text)[:limit] or "-"


def sd_escaped(value: str) -> str:
    """A PARAM-VALUE with `"`, `\\` and `]` escaped (RFC 5424 section 6.3.3)."""
    return _SD_ESCAPED.sub(r"\\\1", value)


def exchange(config: SyslogConfig, payload: bytes) -> None:
    """Send `payload` on a connection of its own; return once the receiver has read all of it and
    closed in answer. Raises OSError (a TimeoutError past the deadline) otherwise."""
    deadline = time.monotonic() + config.timeout
    sock = socket.create_connection((config.host, config.port), timeout=_left(deadline))
    try:
        if config.tls:
            context = ssl.create_default_context(cafile=config.ca_file)
            sock.settimeout(_left(deadline))
            sock = context.wrap_socket(sock, server_hostname=config.host)
        _send_all(sock, payload, deadline)
        if isinstance(sock, ssl.SSLSocket):
            sock = _tls_closed(sock, deadline)
        else:
            sock.shutdown(socket.SHUT_WR)
            _read_to_end(sock, deadline)
        wait_acknowledged(sock, deadline)
    finally:
        sock.close()


def _send_all(sock: socket.socket, payload: bytes, deadline: float) -> None:
    """sendall, bounded by the deadline over all its writes (an SSLSocket's bounds each one)."""
    unsent = memoryview(payload)
    while unsent:
        sock.settimeout(_left(deadline))
        unsent = unsent[sock.send(unsent[:65536]) :]


def _tls_closed(sock: ssl.SSLSocket, deadline: float) -> socket.socket:
    """Send close_notify and wait for the receiver's end: its close_notify, or (rsyslog, which
    sends none as a server) its end of the TCP stream."""
    sock.settimeout(_left(deadline))
    try:
        return sock.unwrap()
    except ssl.SSLEOFError:
        return sock


def _read_to_end(sock: socket.socket, deadline: float) -> None:
    received = 0
    while True:
        sock.settimeout(_left(deadline))
        chunk = sock.recv(4096)
        if not chunk:
            return
        received += len(chunk)
        if received > MAX_REPLY_BYTES:
            raise ConnectionError("the receiver keeps sending: not a syslog receiver")


def wait_acknowledged(sock: socket.socket, deadline: float) -> None:
    """Wait until the receiver's kernel has acknowledged every byte we sent. A receiver that
    closed before our last bytes arrived answers them with a reset instead: its early close
    looked like the end we wait for, and this tells the two apart."""
    if SIOCOUTQ is None:  # pragma: no cover  (not Linux: the end of stream alone)
        return
    while True:
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise ConnectionError(error, "the receiver reset the connection")
        (unacknowledged,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0" * 4))
        if unacknowledged <= 0:
            return
        _left(deadline)
        time.sleep(0.005)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("AUDIT_SYSLOG_TIMEOUT_SECONDS passed before the receiver confirmed")
    return left
