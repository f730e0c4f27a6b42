"""The raw JSON-RPC view's transcript: what the transport records, and how a turn keeps it."""

import json

import pytest

from registry.console_transcript import (
    MAX_MESSAGE_CHARS,
    MAX_TRANSCRIPT_MESSAGES,
    transcript_capped,
)
from registry.mcp.transport import McpHttpSession
from tests.registry.fault_server import TOOL, FaultServer, Reply, serving

TOKEN = "hbvpd_" + "TranscriptCanary0123456789abcdef"
EXCHANGE_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def fault():
    with serving(FaultServer()) as app:
        yield app


def conversation(fault, **kwargs) -> list[dict]:
    messages: list[dict] = []
    with McpHttpSession(
        fault.mcp, token=TOKEN, timeout=10, recorder=messages.append, **kwargs
    ) as session:
        session.initialize()
        session.notify_initialized()
        session.list_tools()
        session.call_tool(TOOL, {"prompt": "고객 목록", "limit": 3})
    return messages


def test_every_request_of_a_conversation_carries_its_exchange_id(fault):
    conversation(fault, exchange_id=EXCHANGE_ID)
    assert [r.rpc_method for r in fault.requests] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]
    assert {r.headers["x-request-id"] for r in fault.requests} == {EXCHANGE_ID}


def test_without_an_exchange_id_each_request_has_its_own(fault):
    conversation(fault)
    ids = [r.headers["x-request-id"] for r in fault.requests]
    assert len(set(ids)) == len(ids) == 4


@pytest.mark.parametrize(
    "exchange_id", ["short", "x" * 65, "has space here", "quote'quote", "탐색-교환-아이디", ""]
)
def test_an_exchange_id_that_is_not_a_safe_header_value_is_refused_before_anything_is_sent(
    fault, exchange_id
):
    with pytest.raises(ValueError):
        McpHttpSession(fault.mcp, token=TOKEN, timeout=10, exchange_id=exchange_id)
    assert fault.requests == []


def test_the_recorder_hears_each_message_sent_and_each_answer_but_no_header(fault):
    messages = conversation(fault)
    assert [(m["direction"], m["method"]) for m in messages] == [
        ("sent", "initialize"),
        ("received", "initialize"),
        ("sent", "notifications/initialized"),
        ("received", "notifications/initialized"),
        ("sent", "tools/list"),
        ("received", "tools/list"),
        ("sent", "tools/call"),
        ("received", "tools/call"),
    ]
    assert messages[3] == {
        "direction": "received",
        "method": "notifications/initialized",
        "http_status": 202,
    }
    assert messages[6]["message"]["params"]["arguments"] == {"prompt": "고객 목록", "limit": 3}
    assert messages[7]["http_status"] == 200
    assert messages[7]["message"]["result"]["structuredContent"]["row_count"] == 3
    text = json.dumps(messages, ensure_ascii=False)
    assert TOKEN not in text
    assert "authorization" not in text.lower()


def test_an_answer_echoing_the_bearer_is_recorded_redacted(fault):
    def echo(recorded, message):
        said = f"you sent {recorded.headers['authorization']}"
        return Reply.json(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"content": [{"type": "text", "text": said}], "isError": True},
            }
        )

    fault.on("tools/call", echo)
    assert TOKEN not in json.dumps(conversation(fault))


def test_a_turn_keeps_each_message_as_pretty_json():
    kept = transcript_capped(
        [
            {"direction": "sent", "method": "tools/list", "message": {"jsonrpc": "2.0", "id": 2}},
            {"direction": "received", "method": "notifications/initialized", "http_status": 202},
        ]
    )
    assert kept == [
        {
            "direction": "sent",
            "method": "tools/list",
            "text": json.dumps({"id": 2, "jsonrpc": "2.0"}, indent=2),
        },
        {"direction": "received", "method": "notifications/initialized", "http_status": 202},
    ]


def test_a_long_answer_is_cut_and_says_how_long_it_was():
    answer = {"result": {"text": "가" * (MAX_MESSAGE_CHARS * 2)}}
    [kept] = transcript_capped(
        [{"direction": "received", "method": "tools/call", "message": answer}]
    )
    assert len(kept["text"]) == MAX_MESSAGE_CHARS
    assert kept["full_length"] == len(json.dumps(answer, ensure_ascii=False, indent=2))
    [short] = transcript_capped([{"direction": "received", "method": "x", "message": {"a": 1}}])
    assert "full_length" not in short


def test_messages_past_the_cap_are_counted_not_kept():
    entries = [{"direction": "sent", "method": "tools/list", "message": {}}] * (
        MAX_TRANSCRIPT_MESSAGES + 7
    )
    kept = transcript_capped(entries)
    assert len(kept) == MAX_TRANSCRIPT_MESSAGES + 1
    assert kept[-1] == {"direction": "omitted", "count": 7}


def test_the_token_and_anything_shaped_like_a_bearer_are_redacted():
    kept = transcript_capped(
        [
            {
                "direction": "sent",
                "method": "tools/call",
                "message": {"prompt": f"my token is {TOKEN}", "note": "Bearer abc.def-ghi"},
            },
            {"direction": "received", "method": TOKEN, "message": {TOKEN: TOKEN}},
        ],
        known=(TOKEN,),
    )
    text = json.dumps(kept)
    assert TOKEN not in text
    assert "abc.def-ghi" not in text
    assert "[redacted]" in kept[0]["text"]


def test_a_direction_from_elsewhere_cannot_pose_as_an_omission_marker():
    [kept] = transcript_capped([{"direction": "omitted", "method": "x", "count": 10**9}])
    assert kept == {"direction": "received", "method": "x"}


def test_a_lone_surrogate_from_a_server_is_kept_as_its_escape():
    answer = json.loads('{"result": {"text": "a\\ud800b"}}')
    [kept] = transcript_capped(
        [{"direction": "received", "method": "tools/call", "message": answer}]
    )
    kept["text"].encode("utf-8")
    assert "\\ud800" in kept["text"]
