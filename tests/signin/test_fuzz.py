"""No input makes the authorization server answer 500: a bounded table of hostile requests, then
hypothesis over grant types, missing and repeated parameters, huge values, bytes that are not
UTF-8 and wrong content types, on the token, authorize and revoke endpoints (there is no
introspection endpoint)."""

from urllib.parse import quote_from_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signin.server import JWT_BEARER_GRANT
from tests.signin.conftest import authorize_params, new_pkce

pytestmark = pytest.mark.django_db

ENDPOINTS = ("/oauth/token/", "/oauth/revoke_token/")
GRANTS = [
    "authorization_code",
    "refresh_token",
    "password",
    "client_credentials",
    "implicit",
    "urn:ietf:params:oauth:grant-type:device_code",
    JWT_BEARER_GRANT,
    "",
]
NAMES = [
    "grant_type",
    "code",
    "code_verifier",
    "redirect_uri",
    "client_id",
    "client_secret",
    "refresh_token",
    "device_code",
    "resource",
    "scope",
    "token",
    "token_type_hint",
    "username",
    "password",
]
CONTENT_TYPES = [
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=latin-1",
    "application/x-www-form-urlencoded; charset=nonsense",
    "application/json",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "text/plain",
    "",
]

TABLE = [
    (
        "application/x-www-form-urlencoded",
        b"grant_type=urn:ietf:params:oauth:grant-type:device_code",
    ),
    ("application/x-www-form-urlencoded", b"grant_type=authorization_code"),
    ("application/x-www-form-urlencoded", b"grant_type=authorization_code&code="),
    ("application/x-www-form-urlencoded", b"grant_type=authorization_code&code=x&client_id="),
    ("application/x-www-form-urlencoded", b"grant_type=refresh_token"),
    ("application/x-www-form-urlencoded", b"grant_type=refresh_token&refresh_token=%00"),
    ("application/x-www-form-urlencoded", b"grant_type=refresh_token&refresh_token=\xff\xfe"),
    (
        "application/x-www-form-urlencoded",
        b"grant_type=authorization_code&code=%ff%fe&client_id=%00",
    ),
    ("application/x-www-form-urlencoded", b"grant_type=%ff&grant_type=%fe"),
    ("application/x-www-form-urlencoded", b"token=x&client_id=%00&token_type_hint=%00"),
    ("application/x-www-form-urlencoded", b"grant_type=password&username=%00&password=%00"),
    (
        "application/x-www-form-urlencoded",
        b"grant_type=refresh_token&refresh_token=" + b"A" * 200_000,
    ),
    ("application/x-www-form-urlencoded", b"code=" + b"x" * 2_000_000),
    ("application/x-www-form-urlencoded", b"&&&==&=&"),
    ("application/x-www-form-urlencoded", b"%"),
    (
        "application/x-www-form-urlencoded",
        b"resource=a&resource=b&grant_type=authorization_code&code=x",
    ),
    ("application/json", b'{"grant_type": "authorization_code", "code": "x"}'),
    ("application/json", b"\xff"),
    (
        "multipart/form-data; boundary=x",
        b"--x\r\nContent-Disposition: form-data; name=grant_type\r\n\r\npassword\r\n--x--",
    ),
    ("multipart/form-data", b"garbage"),
    ("multipart/form-data; boundary=x", b"\xff\xfe\x00"),
    ("text/plain", b"grant_type=authorization_code"),
    ("", b""),
]


def assert_answered(response) -> None:
    assert response.status_code < 500, (response.status_code, response.content[:300])


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(("content_type", "body"), TABLE)
def test_hostile_token_and_revocation_requests_are_answered(client, endpoint, content_type, body):
    assert_answered(client.generic("POST", endpoint, body, content_type=content_type))


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("query", ["grant_type=password", "%ff", "code=%00", "x=" + "y" * 10_000])
def test_a_query_string_on_a_post_is_answered(client, endpoint, query):
    response = client.generic(
        "POST",
        f"{endpoint}?{query}",
        b"grant_type=authorization_code",
        content_type="application/x-www-form-urlencoded",
    )
    assert_answered(response)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_other_methods_are_answered(client, endpoint, method):
    assert_answered(client.generic(method, endpoint))


values = st.one_of(
    st.sampled_from(GRANTS),
    st.text(max_size=60),
    st.binary(max_size=60).map(lambda raw: raw.decode("latin-1")),
    st.integers(min_value=1, max_value=300_000).map(lambda n: "x" * n),
)
pairs = st.lists(st.tuples(st.sampled_from(NAMES), values), max_size=8)


def encoded(items, raw_bytes: bool) -> bytes:
    def part(value: str) -> str:
        data = value.encode("latin-1", "replace") if raw_bytes else value.encode("utf-8", "replace")
        return quote_from_bytes(data)

    return "&".join(f"{name}={part(value)}" for name, value in items).encode()


FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@FUZZ
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    items=pairs,
    raw_bytes=st.booleans(),
    content_type=st.sampled_from(CONTENT_TYPES),
    authorization=st.one_of(st.none(), st.text(max_size=40), st.just("Basic %%%")),
)
def test_fuzzed_token_and_revocation_requests_are_answered(
    client, client_app, endpoint, items, raw_bytes, content_type, authorization
):
    # Now and then the real client's id, so that requests get past the first checks.
    items = [(n, client_app.client_id if v == "client" else v) for n, v in items]
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    body = encoded(items, raw_bytes)
    response = client.generic("POST", endpoint, body, content_type=content_type, **headers)
    assert_answered(response)


@FUZZ
@given(
    items=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "response_type",
                    "client_id",
                    "redirect_uri",
                    "code_challenge",
                    "code_challenge_method",
                    "state",
                    "resource",
                    "scope",
                    "prompt",
                    "nonce",
                ]
            ),
            values,
        ),
        max_size=6,
    ),
    keep=st.booleans(),
    raw_bytes=st.booleans(),
)
def test_fuzzed_authorization_requests_are_answered(
    client, client_app, planner, items, keep, raw_bytes
):
    client.force_login(planner)
    # Start from a valid request (or nothing) and add, repeat or replace parameters.
    base = list(authorize_params(client_app, new_pkce()).items()) if keep else []
    query = encoded(base + items, raw_bytes).decode()
    assert_answered(client.get(f"/oauth/authorize/?{query}"))


@pytest.mark.parametrize(
    "query",
    [
        "%ff%fe",
        "client_id=%00",
        "client_id=" + "x" * 100_000,
        "redirect_uri=%ff",
        "response_type=code&client_id=a&client_id=b",
        "code_challenge=%00" * 3,
        "resource=%ff&resource=http://testserver/mcp",
    ],
)
def test_hostile_authorization_requests_are_answered(client, client_app, planner, query):
    client.force_login(planner)
    assert_answered(client.get(f"/oauth/authorize/?{query}"))
    assert_answered(client.post(f"/oauth/authorize/?{query}", {"allow": "true"}))
