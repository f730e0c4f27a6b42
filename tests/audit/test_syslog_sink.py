"""The syslog sink: RFC 5424 messages carrying OCSF JSON reach Debian's rsyslogd whole, a batch
counts as delivered only once rsyslog has read all of it, and every wait is bounded."""

import signal
import socket
import ssl
import threading
import time
from contextlib import contextmanager

import orjson
import pytest
from django.conf import settings as django_settings

from audit.chain import event_hash
from audit.export import EVENT_FIELDS, event_record, ocsf_event
from audit.models import AuditEvent
from audit.selectors import events_in_sequence
from audit.services import SOURCE, audit_events_append
from audit.sinks.base import SinkUnavailable
from audit.sinks.syslog import (
    SEVERITIES,
    SyslogConfig,
    SyslogSink,
    batch_frames,
    printable,
    sd_escaped,
    syslog_message,
    wait_acknowledged,
)
from conftest import service_missing
from tests.audit.rsyslog_receiver import (
    GTLS_DRIVER,
    RSYSLOGD,
    Certificates,
    Rsyslog,
    certificates,
    ocsf,
)

TIMEOUT = 5.0  # AUDIT_SYSLOG_TIMEOUT_SECONDS against rsyslog
HOSTILE_TIMEOUT = 2.0  # ... against a receiver that never answers: the test waits this long
SLACK = 5.0  # what a busy two-core machine may add to a bounded wait
KOREAN = '감사 기록\n둘째 줄\t"따옴표" \\ 괄호] 끝'
CANARY = "hbvpd_CanaryToken0123456789abcdefXYZ"


def request_event(index: int = 0, **values) -> dict:
    return {
        "action": "mcp.tools_call",
        "outcome": "allowed",
        "http_status": 200,
        "rpc_method": "tools/call",
        "tool": "ords.query.kb_select_ai_vpd",
        "stakeholder_id": "KB-P-001",
        "client_address": "127.0.0.1",
        "user_agent": "agent/1.0",
        "latency_ms": 1.5 + index,
        "row_count": index,
        "masked_columns": ["rrn"],
        **values,
    }


def appended(events: list[dict]) -> list[dict]:
    """The events appended to the chain, read back as exported."""
    rows = audit_events_append(events=events)
    return [
        event_record(row)
        for row in events_in_sequence(
            source=SOURCE,
            fields=EVENT_FIELDS,
            after=rows[0].sequence - 1,
            through=rows[-1].sequence,
        )
    ]


@contextmanager
def running_rsyslog(directory, settings, tls: Certificates | None = None):
    if RSYSLOGD is None:
        service_missing("Debian's rsyslog is not installed (`make rsyslog` installs it as root)")
    receiver = Rsyslog(directory, tls=tls)
    try:
        receiver.start()
        receiver.wait_listening()
        settings.AUDIT_SYSLOG_ADDRESS = receiver.address
        settings.AUDIT_SYSLOG_TIMEOUT_SECONDS = TIMEOUT
        settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 65536  # rsyslog runs with maxMessageSize="64k"
        yield receiver
    finally:
        receiver.kill()


@pytest.fixture
def rsyslog(tmp_path, settings):
    with running_rsyslog(tmp_path / "rsyslog", settings) as receiver:
        yield receiver


# --- the messages ---------------------------------------------------------------------------


def test_every_outcome_has_a_severity_chosen_for_it():
    assert set(SEVERITIES) == set(AuditEvent.Outcome)


def test_header_fields_hold_only_printable_ascii_within_their_lengths():
    assert printable("감사 host", 255) == "___host"
    assert printable("", 48) == "-"
    assert (
        printable("mcp.notifications_roots_list_changed", 32) == "mcp.notifications_roots_list_cha"
    )


def test_structured_data_values_escape_quote_backslash_and_bracket():
    assert sd_escaped('a"b\\c]d') == 'a\\"b\\\\c\\]d'


@pytest.mark.django_db
def test_a_message_is_rfc_5424_with_the_chain_in_its_structured_data():
    (record,) = appended([request_event(outcome="forbidden", http_status=403)])
    message = syslog_message(record, hostname="감사 host", app_name="hyperbook")
    head, json_text = message.split(b"\xef\xbb\xbf", 1)
    assert head.decode() == (
        f"<108>1 {record['occurred_at']} ___host hyperbook - mcp.tools_call "
        f'[hyperbook@32473 source="hyperbook" sequence="{record["sequence"]}" '
        f'hash="{record["hash"]}" event_id="{record["id"]}"] '
    )
    assert json_text == orjson.dumps(ocsf_event(record))


@pytest.mark.django_db
def test_a_batch_stops_at_its_byte_limit_and_leaves_the_rest_for_the_next():
    records = appended([request_event(i) for i in range(10)])
    one = len(syslog_message(records[0], hostname="h", app_name="hyperbook"))
    config = SyslogConfig(host="h", port=1, max_batch_bytes=3 * (one + 6))
    frames, ids = batch_frames(records, config, hostname="h")
    assert ids == {r["id"] for r in records[:3]}
    assert len(b"".join(frames)) <= config.max_batch_bytes


def test_the_receiver_is_read_from_settings(settings):
    settings.AUDIT_SYSLOG_ADDRESS = ""
    assert not SyslogSink().enabled()
    settings.AUDIT_SYSLOG_ADDRESS = "[::1]:6514"
    settings.AUDIT_SYSLOG_TLS = True
    assert SyslogSink().enabled()
    config = SyslogConfig.from_settings()
    assert (config.host, config.port, config.tls, config.max_message_bytes) == (
        "::1",
        6514,
        True,
        8096,  # what a stock rsyslog takes (its maxMessageSize, "8k", is 8096 bytes)
    )


# --- against rsyslog ------------------------------------------------------------------------


def received_by_id(messages: list[dict]) -> dict[str, dict]:
    return {ocsf(message)["metadata"]["uid"]: message for message in messages}


@pytest.mark.slow
@pytest.mark.django_db
def test_a_batch_of_events_reaches_rsyslog_whole(rsyslog):
    records = appended(
        [
            request_event(0),
            request_event(1, outcome="forbidden", http_status=403, detail="tool_not_delegated"),
            request_event(2, outcome="refused", detail="out_of_data"),
            request_event(3, outcome="error", http_status=500, user_agent=KOREAN),
            request_event(4, action="mcp.notifications_roots_list_changed"),
            {
                "action": "registry.server_updated",
                "outcome": "changed",
                "actor": "관리자",
                "target": KOREAN,
                "changes": {"before": {"이름": "KB"}, "after": {"이름": KOREAN, "목록": [KOREAN]}},
            },
        ]
    )
    assert SyslogSink().deliver(records) == {r["id"] for r in records}
    received = received_by_id(rsyslog.wait_received({r["id"] for r in records}))
    hostname = printable(socket.gethostname(), 255)
    for record in records:
        message = received[record["id"]]
        event = ocsf(message)
        assert event["unmapped"] == record  # Korean, newlines, quotes and brackets intact
        assert event_hash(event["unmapped"]) == record["hash"]
        assert event == ocsf_event(record)
        assert message["raw"].encode() == syslog_message(
            record, hostname=hostname, app_name="hyperbook"
        )
        # What rsyslog's own RFC 5424 parser read from the header and structured data:
        assert message["facility"] == 13
        assert message["severity"] == SEVERITIES[record["outcome"]]
        assert (message["hostname"], message["app_name"], message["procid"]) == (
            hostname,
            "hyperbook",
            "-",
        )
        assert message["msgid"] == record["action"][:32]
        assert message["timestamp"] == record["occurred_at"]
        assert message["structured_data"] == (
            f'[hyperbook@32473 source="hyperbook" sequence="{record["sequence"]}" '
            f'hash="{record["hash"]}" event_id="{record["id"]}"]'
        )
    severities = [received[r["id"]]["severity"] for r in records]
    assert severities == [6, 4, 5, 3, 6, 6]
    assert len(rsyslog.received()) == len(records)


@pytest.mark.slow
@pytest.mark.django_db
def test_a_token_shaped_user_agent_arrives_as_recorded_and_the_sink_adds_no_secret(
    rsyslog, settings
):
    # The MCP gate redacts secret shapes from a User-Agent before recording it, the sign-in pages
    # keep it as sent; either way what an event holds is audited data, hashed, and goes out exactly
    # as recorded.
    settings.EGS2_MEMORY_API_TOKEN = "hbapi_SettingsCanary0123456789"
    (record,) = appended([request_event(user_agent=f"agent/1.0 {CANARY}")])
    assert SyslogSink().deliver([record]) == {record["id"]}
    (message,) = rsyslog.wait_received({record["id"]})
    event = ocsf(message)
    assert (
        event["unmapped"]["user_agent"]
        == event["http_request"]["user_agent"]
        == record["user_agent"]
    )
    assert message["raw"].count(CANARY) == 2  # those two places, nowhere else
    secrets = {
        name: value
        for name in dir(django_settings)
        if name.endswith(("SECRET", "TOKEN", "PASSWORD", "KEY"))
        and isinstance(value := getattr(django_settings, name), str)
        and len(value) >= 8
    }
    assert {"SECRET_KEY", "TOKEN_FINGERPRINT_KEY", "EGS2_MEMORY_API_TOKEN"} <= secrets.keys()
    everything = rsyslog.received_path.read_text()
    assert [name for name, value in secrets.items() if value in everything] == []


@pytest.mark.slow
@pytest.mark.django_db
def test_an_event_too_large_for_the_receiver_is_left_undelivered_and_reported_not_cut(
    rsyslog, settings, caplog
):
    settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 8096  # a stock rsyslog's limit
    large = {
        "action": "registry.server_updated",
        "outcome": "changed",
        "changes": {"after": {"설명": "긴 설명 " * 2000}},
    }
    first, too_large, last = appended([request_event(0), large, request_event(1)])
    assert SyslogSink().deliver([first, too_large, last]) == {first["id"], last["id"]}
    assert f"audit event {too_large['id']} (#{too_large['sequence']}) not sent" in caplog.text
    received = received_by_id(rsyslog.wait_received({first["id"], last["id"]}))
    assert too_large["id"] not in received

    settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 65536  # raised with rsyslog's maxMessageSize
    assert SyslogSink().deliver([too_large]) == {too_large["id"]}
    message = received_by_id(rsyslog.wait_received({too_large["id"]}))[too_large["id"]]
    assert len(message["raw"].encode()) > 8096
    assert event_hash(ocsf(message)["unmapped"]) == too_large["hash"]
    assert len(rsyslog.received()) == 3


# --- rsyslog stopped, restarted, killed -----------------------------------------------------

EVENTS = 1200
BATCH = 25
RESTART_AFTER = (300, 600, 900)  # delivered events
LOOP_SECONDS = 180


class Delivering:
    """A delivery loop like the engine's: a batch at a time, sent again until acknowledged."""

    def __init__(self, records: list[dict]):
        self.records = records
        self.position = 0  # the records before it are acknowledged
        self.unavailable = 0

    def run(self) -> None:
        sink, deadline = SyslogSink(), time.monotonic() + LOOP_SECONDS
        while self.position < len(self.records):
            assert time.monotonic() < deadline, f"stuck at {self.position} of {len(self.records)}"
            batch = self.records[self.position : self.position + BATCH]
            try:
                acknowledged = sink.deliver(batch)
            except SinkUnavailable:
                self.unavailable += 1
                time.sleep(0.05)
                continue
            assert acknowledged == {r["id"] for r in batch}
            self.position += len(batch)


def restarting(rsyslog: Rsyslog, loop: Delivering, errors: list) -> None:
    """Stop rsyslog (SIGTERM) each time the loop gets past a mark, and start it again soon."""
    try:
        for mark in RESTART_AFTER:
            while loop.position < mark:
                time.sleep(0.002)
            rsyslog.stop(signal.SIGTERM)
            time.sleep(0.5)  # the loop finds nobody listening meanwhile
            rsyslog.start()
    except Exception as error:  # noqa: BLE001  (raised again in the test's thread)
        errors.append(error)


@pytest.mark.slow
@pytest.mark.django_db
def test_every_event_arrives_though_rsyslog_is_stopped_and_restarted_mid_run(rsyslog):
    records = appended([request_event(i) for i in range(EVENTS)])
    loop, errors = Delivering(records), []
    restarter = threading.Thread(target=restarting, args=(rsyslog, loop, errors))
    restarter.start()
    try:
        loop.run()
    finally:
        loop.position = len(records)  # lets the restarter finish if the loop failed
        restarter.join(timeout=LOOP_SECONDS)
    assert not errors, errors
    ids = [ocsf(m)["metadata"]["uid"] for m in rsyslog.wait_received({r["id"] for r in records})]
    duplicates = len(ids) - len(set(ids))
    print(
        f"\n{len(records)} events through {len(RESTART_AFTER)} restarts, "
        f"{loop.unavailable} batches sent again, {duplicates} duplicates received"
    )
    assert set(ids) == {r["id"] for r in records}
    assert loop.unavailable > 0  # the loop did meet rsyslog stopped
    assert rsyslog.process is not None and rsyslog.process.poll() is None


@pytest.mark.slow
@pytest.mark.django_db
def test_a_batch_rsyslog_is_killed_in_the_middle_of_is_not_acknowledged_and_is_sent_again(
    rsyslog,
):
    records = appended([request_event(i) for i in range(200)])
    assert rsyslog.process is not None
    # Stopped, rsyslog reads nothing: the batch waits in its kernel until the kill ends it.
    rsyslog.process.send_signal(signal.SIGSTOP)
    outcome: list = []

    def attempt():
        try:
            outcome.append(SyslogSink().deliver(records))
        except SinkUnavailable as error:
            outcome.append(error)

    sender = threading.Thread(target=attempt)
    started = time.monotonic()
    sender.start()
    time.sleep(1.0)
    rsyslog.stop(signal.SIGKILL)
    sender.join(timeout=TIMEOUT + SLACK)
    assert len(outcome) == 1 and isinstance(outcome[0], SinkUnavailable), outcome
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert rsyslog.received() == []

    rsyslog.start()
    rsyslog.wait_listening()
    assert SyslogSink().deliver(records) == {r["id"] for r in records}
    rsyslog.wait_received({r["id"] for r in records})


# --- receivers that do not play along -------------------------------------------------------


@contextmanager
def hostile_receiver(behaviour):
    """A loopback listener whose connections `behaviour(connection, stop)` handles, in a thread;
    yields its address."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                behaviour(connection, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=SLACK)
        listener.close()


def never_reads(connection, stop):
    stop.wait(60)


def reads_and_never_closes(connection, stop):
    connection.settimeout(0.1)
    while not stop.is_set():
        try:
            if not connection.recv(65536):
                stop.wait(60)  # our end of stream: read, and never answered
        except TimeoutError:
            continue


def reads_one_chunk_and_closes(connection, stop):
    connection.recv(65536)


def answers_without_end(connection, stop):
    connection.settimeout(1)
    while not stop.is_set():
        try:
            connection.sendall(b"x" * 65536)
        except OSError:  # the sink hung up, as it should
            return


@pytest.fixture
def large_batch(db):
    return appended([request_event(i, changes={"설명": "긴 설명 " * 500}) for i in range(200)])


@pytest.mark.slow
@pytest.mark.parametrize(
    "behaviour", [never_reads, reads_and_never_closes], ids=["never-reads", "never-closes"]
)
def test_a_receiver_that_never_confirms_fails_the_batch_within_the_timeout(
    settings, large_batch, behaviour
):
    settings.AUDIT_SYSLOG_TIMEOUT_SECONDS = HOSTILE_TIMEOUT
    settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 65536
    with hostile_receiver(behaviour) as address:
        settings.AUDIT_SYSLOG_ADDRESS = address
        started = time.monotonic()
        with pytest.raises(SinkUnavailable, match="AUDIT_SYSLOG_TIMEOUT_SECONDS|timed out"):
            SyslogSink().deliver(large_batch)
        assert HOSTILE_TIMEOUT - 0.1 < time.monotonic() - started < HOSTILE_TIMEOUT + SLACK


@pytest.mark.slow
def test_a_receiver_that_closes_before_reading_everything_never_acknowledges(settings, large_batch):
    settings.AUDIT_SYSLOG_TIMEOUT_SECONDS = TIMEOUT
    settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 65536
    with hostile_receiver(reads_one_chunk_and_closes) as address:
        settings.AUDIT_SYSLOG_ADDRESS = address
        for _ in range(40):
            with pytest.raises(SinkUnavailable):
                SyslogSink().deliver(large_batch[:30])  # about 220 kB


def test_an_end_of_stream_counts_only_once_the_receiver_acknowledged_every_byte():
    # A receiver that closes with nothing left to read ends its stream cleanly even when more of
    # ours is on its way (which it then refuses): our bytes it has not acknowledged tell.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
        with client, receiver:
            client.setblocking(False)
            with pytest.raises(BlockingIOError):
                while True:  # until its window and our send buffer are full
                    client.send(b"x" * 65536)
            with pytest.raises(TimeoutError):
                wait_acknowledged(client, time.monotonic() + 0.3)
            receiver.close()  # with our bytes unread: a reset
            with pytest.raises(ConnectionError):
                wait_acknowledged(client, time.monotonic() + SLACK)


@pytest.mark.slow
def test_a_receiver_that_talks_back_without_end_is_left_at_once(settings, large_batch):
    settings.AUDIT_SYSLOG_TIMEOUT_SECONDS = TIMEOUT
    settings.AUDIT_SYSLOG_MAX_MESSAGE_BYTES = 65536
    with hostile_receiver(answers_without_end) as address:
        settings.AUDIT_SYSLOG_ADDRESS = address
        started = time.monotonic()
        with pytest.raises(SinkUnavailable):
            SyslogSink().deliver(large_batch[:1])
        assert time.monotonic() - started < TIMEOUT


@pytest.mark.slow
@pytest.mark.django_db
def test_nobody_listening_fails_the_batch_at_once(settings):
    records = appended([request_event()])
    with hostile_receiver(never_reads) as address:
        pass  # closed again: its port refuses connections
    settings.AUDIT_SYSLOG_ADDRESS = address
    started = time.monotonic()
    with pytest.raises(SinkUnavailable, match="refused"):
        SyslogSink().deliver(records)
    assert time.monotonic() - started < 1 + SLACK


# --- TLS (RFC 5425) ---------------------------------------------------------------------------


@pytest.fixture
def tls_rsyslog(tmp_path, settings):
    if RSYSLOGD is not None and not GTLS_DRIVER:
        service_missing("rsyslog-gnutls is not installed (`make rsyslog` installs it as root)")
    pki = certificates(tmp_path / "pki")
    with running_rsyslog(tmp_path / "rsyslog", settings, tls=pki) as receiver:
        settings.AUDIT_SYSLOG_TLS = True
        settings.AUDIT_SYSLOG_CA_FILE = str(pki.ca)
        settings.AUDIT_SYSLOG_ADDRESS = f"localhost:{receiver.port}"
        yield receiver


@pytest.mark.slow
@pytest.mark.django_db
def test_over_tls_a_batch_reaches_rsyslog_whole(tls_rsyslog):
    records = appended([request_event(i, user_agent=KOREAN) for i in range(300)])
    assert SyslogSink().deliver(records) == {r["id"] for r in records}
    received = received_by_id(tls_rsyslog.wait_received({r["id"] for r in records}))
    for record in records:
        assert ocsf(received[record["id"]])["unmapped"] == record
    assert len(tls_rsyslog.received()) == len(records)


@pytest.mark.slow
@pytest.mark.django_db
def test_over_tls_a_receiver_that_cannot_prove_its_name_gets_nothing(
    tls_rsyslog, settings, tmp_path
):
    records = appended([request_event()])
    settings.AUDIT_SYSLOG_CA_FILE = str(certificates(tmp_path / "other").ca)
    with pytest.raises(SinkUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        SyslogSink().deliver(records)
    settings.AUDIT_SYSLOG_CA_FILE = str(tmp_path / "pki" / "ca.pem")
    settings.AUDIT_SYSLOG_ADDRESS = tls_rsyslog.address  # 127.0.0.1: not the certificate's name
    with pytest.raises(SinkUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        SyslogSink().deliver(records)
    time.sleep(0.5)
    assert tls_rsyslog.received() == []


@pytest.mark.slow
@pytest.mark.django_db
def test_over_tls_a_receiver_that_never_closes_fails_the_batch_within_the_timeout(
    settings, tmp_path
):
    pki = certificates(tmp_path / "pki")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.cert, pki.key)

    def reads_over_tls_and_never_closes(connection, stop):
        with context.wrap_socket(connection, server_side=True) as tls:
            reads_and_never_closes(tls, stop)

    records = appended([request_event()])
    settings.AUDIT_SYSLOG_TLS = True
    settings.AUDIT_SYSLOG_CA_FILE = str(pki.ca)
    settings.AUDIT_SYSLOG_TIMEOUT_SECONDS = HOSTILE_TIMEOUT
    with hostile_receiver(reads_over_tls_and_never_closes) as address:
        settings.AUDIT_SYSLOG_ADDRESS = address.replace("127.0.0.1", "localhost")
        started = time.monotonic()
        with pytest.raises(SinkUnavailable, match="timed out"):
            SyslogSink().deliver(records)
        assert HOSTILE_TIMEOUT - 0.1 < time.monotonic() - started < HOSTILE_TIMEOUT + SLACK
