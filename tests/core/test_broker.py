"""The embedded broker (core/broker.py) through kombu: whole messages only, bad ones set aside."""

import os
import stat
import uuid
from contextlib import contextmanager

import pytest
from kombu import Connection, Exchange, Queue

BODY = {"task": "audit.deliver_pending", "args": [], "kwargs": {}}


@contextmanager
def connected(tmp_path):
    options = {
        "data_folder_in": str(tmp_path / "broker"),
        "data_folder_out": str(tmp_path / "broker"),
        "processed_folder": str(tmp_path / "broker-processed"),
        "dead_letter_folder": str(tmp_path / "broker-dead"),
        "control_folder": str(tmp_path / "broker-control"),
    }
    # kombu remembers bindings per process: a queue name of its own for each test.
    name = f"q{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    with Connection(
        "filesystem://", transport="core.broker:Transport", transport_options=options
    ) as conn:
        assert conn.default_channel is not None  # creating the channel creates the folders
        yield conn, queue


@pytest.fixture
def broker(tmp_path):
    with connected(tmp_path) as (conn, queue):
        yield conn, queue, tmp_path


def publish(conn, queue, body=BODY):
    conn.Producer(serializer="json").publish(
        body, exchange=queue.exchange, routing_key=queue.name, declare=[queue]
    )


def drop(folder, queue, content: bytes, stamp="0000000000001") -> str:
    name = f"{stamp}_{uuid.uuid4()}.{queue.name}.msg"
    (folder / "broker" / name).write_bytes(content)
    return name


def test_a_published_message_is_consumed_whole(broker):
    conn, queue, _ = broker
    publish(conn, queue)
    message = conn.SimpleQueue(queue).get(timeout=2)
    assert message.payload == BODY


@pytest.mark.parametrize(
    "content",
    [b"", b'{"body": "trunc', b"not json at all", b"[1, 2, 3]", b'{"body": "x"}', b"\xff\xfe"],
    ids=["empty", "truncated", "garbage", "not-an-object", "no-properties", "not-utf8"],
)
def test_a_malformed_message_is_set_aside_and_the_next_one_arrives(broker, content, caplog):
    conn, queue, folder = broker
    publish(conn, queue)  # declares the queue's binding
    conn.SimpleQueue(queue).get(timeout=2).ack()
    bad = drop(folder, queue, content)
    publish(conn, queue)
    message = conn.SimpleQueue(queue).get(timeout=2)
    assert message.payload == BODY
    assert (folder / "broker-dead" / bad).read_bytes() == content
    assert not (folder / "broker" / bad).exists()
    assert "malformed message" in caplog.text


def test_a_message_still_being_written_is_not_seen(broker):
    conn, queue, folder = broker
    publish(conn, queue)
    conn.SimpleQueue(queue).get(timeout=2).ack()
    # What a publisher has open: the temporary name, not yet renamed into place.
    partial = folder / "broker" / f".0000000000001_{uuid.uuid4()}.{queue.name}.msg.part"
    partial.write_bytes(b'{"body": "half')
    with pytest.raises(conn.SimpleQueue(queue).Empty):
        conn.SimpleQueue(queue).get(timeout=0.5)
    assert partial.exists()


def test_messages_and_folders_are_the_service_users_only(tmp_path):
    (tmp_path / "broker").mkdir(mode=0o755)  # as an older version left it
    old = os.umask(0o022)
    try:
        with connected(tmp_path) as (conn, queue):
            publish(conn, queue)
    finally:
        os.umask(old)
    (message,) = [p for p in (tmp_path / "broker").iterdir()]
    assert stat.S_IMODE(message.stat().st_mode) == 0o600
    for name in ("broker", "broker-processed", "broker-dead"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o700
