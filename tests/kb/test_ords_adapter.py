"""The ORDS Select AI adapter (kb.ords) against a stand-in ORDS server thread on loopback."""

import json
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from kb.answering import answer_question, warm_up
from kb.answers import ANSWER_JSON_SCHEMA
from kb.models import Stakeholder
from kb.ords import (
    STAKEHOLDER_HEADER,
    OrdsConfig,
    OrdsError,
    OrdsRefused,
    normalise_bearer,
    ords_answer,
    ords_config,
)
from kb.policy import PolicyRefused
from tests.kb.test_selectai_provider import LoopbackServer, json_reply

BEARER = "vpd_tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
CLIENT_TOKEN = "hyperbook-ords-client-0123456789"
PLANNER = Stakeholder(stakeholder_id="KB-P-001", role="planner", branch_id="BR-GN")

ORDS_ITEMS = [
    {
        "customer_id": "C0001",
        "customer_name": "신하은",
        "phone": "010-8962-2842",
        "age": 39,
        "vip": False,
        "tags": ["a", "b"],
        "links": [{"rel": "self", "href": "https://ords.example/c/C0001"}],
    },
    {"customer_id": "C0002", "customer_name": "정수아", "phone": None, "age": 38.5},
]


@pytest.fixture
def ords():
    stand_in = LoopbackServer(respond=lambda r: json_reply({"items": ORDS_ITEMS, "hasMore": False}))
    with stand_in.running() as url:
        stand_in.url = f"{url}/ords/kb/select_ai/"
        stand_in.config = OrdsConfig(url=stand_in.url, timeout_seconds=0.5)
        yield stand_in


def ask(ords, *, prompt="담당 고객 목록", limit=20, bearer=BEARER, config=None) -> dict:
    return ords_answer(
        prompt=prompt,
        limit=limit,
        stakeholder=PLANNER,
        bearer=bearer,
        config=config or ords.config,
    )


def valid_answer(answer: dict) -> dict:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(json.dumps(answer)), ANSWER_JSON_SCHEMA)
    return answer


# --- the request ------------------------------------------------------------------------------


def test_it_posts_only_prompt_and_limit_with_the_callers_bearer(ords):
    ask(ords, prompt="이번 달 미납 보험료", limit=7, bearer=f"  Bearer {BEARER} ")
    (request,) = ords.requests
    assert request.method == "POST" and request.path == "/ords/kb/select_ai/"
    assert request.json() == {"prompt": "이번 달 미납 보험료", "limit": 7}
    assert request.headers["Authorization"] == f"Bearer {BEARER}"
    assert request.headers["Accept"] == "application/json"
    assert STAKEHOLDER_HEADER not in request.headers  # ORDS learns who asks from the token only


def test_without_a_bearer_it_asserts_the_stakeholder_with_the_client_credential(ords):
    config = OrdsConfig(url=ords.url, timeout_seconds=1, client_token=CLIENT_TOKEN)
    ask(ords, bearer=None, config=config)
    (request,) = ords.requests
    assert request.headers["Authorization"] == f"Bearer {CLIENT_TOKEN}"
    assert request.headers[STAKEHOLDER_HEADER] == "KB-P-001"
    assert CLIENT_TOKEN not in repr(config)


def test_without_a_bearer_or_a_client_credential_nothing_is_sent(ords):
    with pytest.raises(ImproperlyConfigured, match="ORDS_SELECT_AI_CLIENT_TOKEN"):
        ask(ords, bearer=None)
    assert ords.requests == []


@pytest.mark.parametrize("bearer", ["", "   ", "two words", "tok\r\nX-Evil: 1", "한글토큰"])
def test_a_malformed_bearer_is_refused_before_any_request(ords, bearer):
    with pytest.raises(OrdsRefused) as refused:
        ask(ords, bearer=bearer)
    assert refused.value.status == 401
    assert ords.requests == []


def test_bearer_normalisation():
    assert normalise_bearer(f"bearer {BEARER}") == BEARER
    assert normalise_bearer(f"\t{BEARER}\n") == BEARER
    assert normalise_bearer("Bearer") == "Bearer"  # a token that happens to be the word
    assert normalise_bearer(None) is None


# --- the reply, mapped ------------------------------------------------------------------------


def test_an_ords_collection_becomes_the_answer_shape(ords):
    answer = valid_answer(ask(ords))
    assert [c["name"] for c in answer["columns"]] == [
        "customer_id",
        "customer_name",
        "phone",
        "age",
        "vip",
        "tags",
    ]  # ORDS' hypermedia links are not a column
    assert answer["rows"][0] == {
        "customer_id": "C0001",
        "customer_name": "신하은",
        "phone": "010-8962-2842",
        "age": 39,
        "vip": "false",
        "tags": '["a","b"]',
    }
    assert answer["rows"][1]["vip"] is None and answer["rows"][1]["age"] == 38.5
    assert answer["row_count"] == 2 and answer["truncated"] is False and answer["limit"] == 20
    assert answer["stakeholder"] == {"id": "KB-P-001", "role": "planner", "branch_id": "BR-GN"}
    assert answer["as_of"] == "2026-06-30"
    assert answer["interpretation"]["source"] == "ords"


def test_declared_columns_labels_masks_and_summary_are_kept(ords):
    ords.respond = lambda r: json_reply(
        {
            "items": ORDS_ITEMS,
            "columns": [{"name": "customer_id", "label": "고객 ID"}, "phone"],
            "masked_columns": ["phone", "rrn"],
            "summary": "담당 고객 2명",
            "as_of": "2026-07-01",
        }
    )
    answer = valid_answer(ask(ords))
    assert answer["columns"] == [
        {"name": "customer_id", "label": "고객 ID"},
        {"name": "phone", "label": "phone"},
    ]
    assert answer["rows"] == [
        {"customer_id": "C0001", "phone": "010-8962-2842"},
        {"customer_id": "C0002", "phone": None},
    ]
    assert answer["masked_columns"] == ["phone"]  # only columns the answer has
    assert answer["interpretation"]["summary"] == "담당 고객 2명"
    assert answer["as_of"] == "2026-07-01"


def test_more_items_than_the_limit_or_has_more_means_truncated(ords):
    answer = valid_answer(ask(ords, limit=1))
    assert answer["row_count"] == 1 and answer["truncated"] is True
    ords.respond = lambda r: json_reply({"items": ORDS_ITEMS[:1], "hasMore": True})
    assert ask(ords, limit=5)["truncated"] is True


def test_an_empty_collection_is_an_empty_answer(ords):
    ords.respond = lambda r: json_reply({"items": [], "hasMore": False})
    answer = valid_answer(ask(ords))
    assert answer["rows"] == [] and answer["columns"] == []


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, reason, message",
    [
        (401, "ords_unauthorized", "토큰이 유효하지 않거나 만료됨"),
        (403, "ords_forbidden", "이 사용자에게 조회 권한 없음"),
    ],
)
def test_401_and_403_are_policy_refusals(ords, status, reason, message):
    ords.respond = lambda r: json_reply({"code": "Unauthorized"}, status=status)
    with pytest.raises(PolicyRefused) as refused:
        ask(ords)
    assert isinstance(refused.value, OrdsRefused)
    assert (refused.value.status, refused.value.reason, str(refused.value)) == (
        status,
        reason,
        message,
    )


@pytest.mark.parametrize(
    "status, reason", [(500, "server_error"), (503, "server_error"), (429, "rate_limited")]
)
def test_server_errors_are_clear_errors_never_retried(ords, status, reason):
    ords.respond = lambda r: json_reply({"message": f"secret detail {BEARER}"}, status=status)
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert (error.value.reason, error.value.status) == (reason, status)
    assert BEARER not in str(error.value) and "secret detail" not in str(error.value)
    assert len(ords.requests) == 1


def test_a_slow_ords_times_out_once(ords):
    ords.respond = lambda r: (time.sleep(3), json_reply({"items": []}))[1]
    started = time.monotonic()
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "timeout"
    assert time.monotonic() - started < 2
    assert len(ords.requests) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_and_is_not_followed(ords, status):
    elsewhere = LoopbackServer(respond=lambda r: json_reply({"items": ORDS_ITEMS}))
    with elsewhere.running() as other:
        ords.respond = lambda r: (status, {"Location": f"{other}/steal"}, b"")
        with pytest.raises(OrdsError) as error:
            ask(ords)
    assert error.value.reason == "redirect"
    assert elsewhere.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"<html>ORDS error page</html>",
        b"[1, 2]",
        b'{"rows": []}',
        b'{"items": [1, 2]}',
        b'{"items": [], "columns": "customer_id"}',
        b'{"items": [{"x": NaN}]}',
        b"\xff\xfe",
    ],
)
def test_a_reply_that_is_not_the_assumed_shape_is_a_clear_error(ords, body):
    ords.respond = lambda r: (200, {"Content-Type": "application/json"}, body)
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "invalid_reply"


def test_a_huge_reply_is_cut_off(ords, monkeypatch):
    monkeypatch.setattr("kb.ords.REPLY_MAX_BYTES", 1000)
    ords.respond = lambda r: json_reply({"items": [{"x": "y" * 2000}]})
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "too_large"


def test_an_unreachable_ords_is_a_clear_error():
    config = OrdsConfig(url="http://127.0.0.1:9/ords/", timeout_seconds=1)
    with pytest.raises(OrdsError) as error:
        ords_answer(prompt="x", limit=1, stakeholder=PLANNER, bearer=BEARER, config=config)
    assert error.value.reason == "unreachable"


# --- settings and the wiring into answer_question ----------------------------------------------


@pytest.mark.parametrize(
    "url, accepted",
    [
        ("https://ords.example.com/ords/kb/select_ai/", True),
        ("http://127.0.0.1:8181/ords/kb/", True),
        ("http://ords.example.com/ords/kb/", False),
        ("https://u:p@ords.example.com/ords/", False),
        ("", False),
    ],
)
def test_the_ords_url_must_be_https_except_on_loopback(settings, url, accepted):
    settings.ORDS_SELECT_AI_URL = url
    settings.ORDS_SELECT_AI_TIMEOUT_SECONDS = 5
    if accepted:
        assert ords_config().url == url
    else:
        with pytest.raises(ImproperlyConfigured, match="ORDS_SELECT_AI_URL"):
            ords_config()


@pytest.fixture
def ords_backend(ords, settings):
    settings.KB_QUERY_BACKEND = "ords"
    settings.ORDS_SELECT_AI_URL = ords.url
    settings.ORDS_SELECT_AI_TIMEOUT_SECONDS = 1
    settings.ORDS_SELECT_AI_CLIENT_TOKEN = CLIENT_TOKEN
    return ords


def test_answer_question_forwards_prompt_and_limit_to_ords(kb, ords_backend):
    answer = answer_question(stakeholder_id="KB-M-001", prompt="전체 고객", limit=500)
    valid_answer(answer)
    (request,) = ords_backend.requests
    assert request.json() == {"prompt": "전체 고객", "limit": 100}
    assert request.headers[STAKEHOLDER_HEADER] == "KB-M-001"
    assert answer["stakeholder"] == {
        "id": "KB-M-001",
        "role": "branch_manager",
        "branch_id": "BR-GN",
    }
    assert answer["interpretation"]["source"] == "ords"


def test_a_suspended_stakeholder_is_refused_before_ords_is_asked(kb, ords_backend):
    with pytest.raises(PolicyRefused):
        answer_question(stakeholder_id="KB-P-099", prompt="전체 고객", limit=10)
    assert ords_backend.requests == []


def test_warm_up_checks_the_ords_settings_without_calling_ords(kb, ords_backend, settings):
    warm_up()
    assert ords_backend.requests == []
    settings.ORDS_SELECT_AI_CLIENT_TOKEN = None
    with pytest.raises(ImproperlyConfigured, match="ORDS_SELECT_AI_CLIENT_TOKEN"):
        warm_up()
    settings.ORDS_SELECT_AI_URL = "http://ords.example.com/"
    with pytest.raises(ImproperlyConfigured, match="https"):
        warm_up()
