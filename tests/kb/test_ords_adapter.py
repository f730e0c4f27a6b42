"""The ORDS Select AI adapter (kb.ords) against an ORDS stand-in on loopback that verifies every
assertion hyperbook signs (tests/kb/ords_stand_in.py), and an STS stand-in for the exchange mode."""

import json
import stat
import time
import types
import uuid
import warnings
from contextlib import ExitStack

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.core.exceptions import ImproperlyConfigured
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from kb import ords_identity
from kb.answering import answer_question, warm_up
from kb.answers import ANSWER_JSON_SCHEMA
from kb.assertions import (
    jwk_thumbprint,
    key_from_file,
    ords_verifiable,
    signing_key_file_generated,
    signing_keys,
)
from kb.catalogue import TOOL_NAME
from kb.models import Stakeholder
from kb.ords import OrdsConfig, OrdsError, OrdsRefused, ords_answer, ords_config
from kb.ords_identity import OrdsIdentity, TokenExchange
from kb.policy import PolicyRefused
from tests.kb.ords_stand_in import (
    AUDIENCE,
    ISSUER,
    STS_ALGORITHMS,
    STS_CLIENT_ID,
    STS_CLIENT_SECRET,
    AssertionVerifier,
    OrdsStandIn,
    StsStandIn,
    jwks_served,
    started,
)
from tests.kb.test_selectai_provider import LoopbackServer, json_reply

PLANNER = Stakeholder(stakeholder_id="KB-P-001", role="planner", branch_id="BR-GN")
MANAGER = Stakeholder(stakeholder_id="KB-M-001", role="branch_manager", branch_id="BR-GN")

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


@pytest.fixture(autouse=True)
def no_exchanged_tokens_between_tests():
    ords_identity._exchanged.clear()
    yield
    ords_identity._exchanged.clear()


@pytest.fixture
def keys(settings):
    return signing_keys(settings.KB_ASSERTION_SIGNING_KEY_FILE, [])


@pytest.fixture
def ords(keys):
    with ExitStack() as stack:
        verifier = AssertionVerifier(jwks_url=jwks_served(keys.jwks, stack))
        stand_in = OrdsStandIn(verifier=verifier, rows_for=lambda sub: ORDS_ITEMS)
        started(stand_in, stack)
        stand_in.config = OrdsConfig(
            url=stand_in.url, timeout_seconds=0.5, identity=identity_for(stand_in.url, keys)
        )
        yield stand_in


def identity_for(url, keys, exchange=None) -> OrdsIdentity:
    return OrdsIdentity(
        issuer=ISSUER,
        audience=AUDIENCE,
        resource=url,
        scope=TOOL_NAME,
        lifetime_seconds=60,
        keys=keys,
        exchange=exchange,
    )


def ask(ords, *, prompt="담당 고객 목록", limit=20, stakeholder=PLANNER, delegation_id=None):
    return ords_answer(
        prompt=prompt,
        limit=limit,
        stakeholder=stakeholder,
        delegation_id=delegation_id,
        config=ords.config,
    )


def valid_answer(answer: dict) -> dict:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(json.dumps(answer)), ANSWER_JSON_SCHEMA)
    return answer


def bearer_of(request) -> str:
    return request.headers["Authorization"].removeprefix("Bearer ")


def key_file(tmp_path, name, private_key) -> str:
    path = tmp_path / name
    path.write_bytes(
        private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(path)


# --- the request: one assertion per request, for the asker ----------------------------------


def test_it_posts_only_prompt_and_limit_with_an_assertion_for_the_asker(ords, keys):
    ask(ords, prompt="이번 달 미납 보험료", limit=7, delegation_id=42)
    (request,) = ords.received
    assert request.method == "POST" and request.path == "/ords/kb/select_ai/"
    assert request.json() == {"prompt": "이번 달 미납 보험료", "limit": 7}
    assert request.headers["Accept"] == "application/json"
    assert not any(name.lower() == "x-kb-stakeholder-id" for name in request.headers)
    header = jwt.get_unverified_header(bearer_of(request))
    assert header == {"alg": "RS256", "typ": "at+jwt", "kid": keys.current.kid}
    (claims,) = ords.accepted
    assert claims["iss"] == ISSUER and claims["aud"] == AUDIENCE
    assert claims["sub"] == "KB-P-001"
    assert (claims["kb_role"], claims["kb_branch"]) == ("planner", "BR-GN")
    assert claims["act"] == {"sub": "42"}
    assert claims["scope"] == TOOL_NAME
    assert claims["exp"] - claims["iat"] == 60 and abs(claims["iat"] - time.time()) < 5


def test_every_request_gets_its_own_assertion(ords):
    ask(ords)
    ask(ords, stakeholder=MANAGER)
    first, second = ords.accepted
    assert first["jti"] != second["jti"]
    assert bearer_of(ords.received[0]) != bearer_of(ords.received[1])
    assert (second["sub"], second["kb_role"]) == ("KB-M-001", "branch_manager")


def test_without_a_delegation_the_actor_is_hyperbook_itself(ords):
    ask(ords)
    assert ords.accepted[0]["act"] == {"sub": "hyperbook"}


def test_the_default_key_is_rsa_3072_and_signs_rs256(keys):
    assert keys.current.algorithm == "RS256"
    assert keys.current.private_key.key_size == 3072


# --- ORDS' JWT profile: what it refuses, shown with tokens the test makes ---------------------


@pytest.fixture(scope="module")
def test_keys() -> dict:
    """Keys of the test's own, each with the JWK the forged tokens' JWKS lists it under."""
    made = {
        "rsa2048": (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
        # Breakable, which is why ORDS refuses it.
        "rsa1024": (rsa.generate_private_key(public_exponent=65537, key_size=1024), "RS256"),  # noqa: S505
        "ed25519": (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
        "p256": (ec.generate_private_key(ec.SECP256R1()), "ES256"),
    }
    to_jwk = {"RS256": RSAAlgorithm, "EdDSA": OKPAlgorithm, "ES256": ECAlgorithm}
    keys = {}
    for name, (private_key, algorithm) in made.items():
        jwk = to_jwk[algorithm].to_jwk(private_key.public_key(), as_dict=True)
        jwk = {**jwk, "kid": jwk_thumbprint(jwk), "alg": algorithm, "use": "sig"}
        jwk.pop("key_ops", None)
        keys[name] = types.SimpleNamespace(private=private_key, algorithm=algorithm, jwk=jwk)
    return keys


def forged(key, *, algorithm=None, kid=None, **claims) -> str:
    """A token the test signs itself, shaped like hyperbook's assertions unless told otherwise."""
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "KB-P-001",
        "scope": TOOL_NAME,
        "iat": now,
        "exp": now + 60,
        "jti": uuid.uuid4().hex,
        **claims,
    }
    headers = {"typ": "at+jwt", "kid": kid or key.jwk["kid"]}
    with warnings.catch_warnings():  # PyJWT warns of the 1024-bit key, which is the point
        warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
        return jwt.encode(
            claims, key.private, algorithm=algorithm or key.algorithm, headers=headers
        )


@pytest.fixture
def profile(ords, keys, test_keys):
    """ORDS with a JWKS that lists hyperbook's keys and every test key, so that a refusal below
    is for the rule named, never for a key it could not find."""
    listed = {"keys": [*keys.jwks()["keys"], *(key.jwk for key in test_keys.values())]}
    with ExitStack() as stack:
        ords.verifier.jwks_url = jwks_served(lambda: listed, stack)
        yield ords


def sent_to_ords(ords, token: str) -> httpx.Response:
    return httpx.post(
        ords.url, json={"prompt": "x", "limit": 1}, headers={"Authorization": f"Bearer {token}"}
    )


def test_a_test_made_rs256_token_from_a_listed_2048_bit_key_is_accepted(profile, test_keys):
    response = sent_to_ords(profile, forged(test_keys["rsa2048"]))
    assert response.status_code == 200, profile.refusals
    assert profile.accepted[-1]["sub"] == "KB-P-001"


HMAC_SECRET = "a-secret-shared-with-nobody-0123456789abcdef"  # noqa: S105


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda k, h: forged(k["ed25519"]), "alg"),
        (lambda k, h: forged(k["p256"]), "alg"),
        # An HMAC under hyperbook's own kid: the classic confusion with a public key.
        (
            lambda k, h: jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "KB-P-001", "scope": TOOL_NAME},
                HMAC_SECRET,
                algorithm="HS256",
                headers={"typ": "at+jwt", "kid": h},
            ),
            "alg",
        ),
        (
            lambda k, h: jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": "KB-P-001", "scope": TOOL_NAME},
                None,
                algorithm="none",
                headers={"typ": "at+jwt", "kid": h},
            ),
            "alg",
        ),
        (lambda k, h: forged(k["rsa1024"]), "key_size"),
        (lambda k, h: forged(k["rsa2048"], iss="https://not-hyperbook.test"), "issuer"),
        (lambda k, h: forged(k["rsa2048"], aud="https://another-ords.kb.test"), "audience"),
        (lambda k, h: forged(k["rsa2048"], kid="a-kid-no-jwks-lists"), "unknown_kid"),
        (
            lambda k, h: forged(
                k["rsa2048"], iat=int(time.time()) - 120, exp=int(time.time()) - 60
            ),
            "expired",
        ),
        (  # exp far off, but issued longer ago than the profile's allowed age
            lambda k, h: forged(
                k["rsa2048"], iat=int(time.time()) - 120, exp=int(time.time()) + 600
            ),
            "too_old",
        ),
        (
            lambda k, h: forged(
                k["rsa2048"], iat=int(time.time()) + 120, exp=int(time.time()) + 180
            ),
            "issued_in_future",
        ),
    ],
    ids=[
        "EdDSA",
        "ES256",
        "HS256",
        "none",
        "rsa1024",
        "wrong_iss",
        "wrong_aud",
        "unknown_kid",
        "expired",
        "too_old",
        "issued_in_future",
    ],
)
def test_ords_refuses_what_its_jwt_profile_does_not_take(profile, keys, test_keys, make, reason):
    response = sent_to_ords(profile, make(test_keys, keys.current.kid))
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert profile.refusals == [reason] and profile.accepted == []


# --- EdDSA and ES256: for an STS only ---------------------------------------------------------


@pytest.mark.parametrize(
    "private_key, algorithm",
    [
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
    ],
)
def test_an_eddsa_or_es256_key_signs_the_assertion_an_sts_gets(
    ords, sts, tmp_path, private_key, algorithm
):
    keys = signing_keys(key_file(tmp_path, "sts-only.pem", private_key), [])
    with ExitStack() as stack:
        sts.verifier = AssertionVerifier(
            jwks_url=jwks_served(keys.jwks, stack), algorithms=STS_ALGORITHMS
        )
        ords.config = OrdsConfig(
            url=ords.url,
            timeout_seconds=1,
            identity=identity_for(ords.url, keys, ords.config.identity.exchange),
        )
        ask(ords)
    (exchange,) = sts.received
    (subject_token,) = [
        v
        for k, v in httpx.QueryParams(exchange.body.decode()).multi_items()
        if k == "subject_token"
    ]
    assert jwt.get_unverified_header(subject_token)["alg"] == algorithm
    assert sts.problems == [] and bearer_of(ords.received[0]) == sts.issued[0]


# --- what the verifier refuses becomes a clear refusal ---------------------------------------


def refused_reason(ords) -> str:
    with pytest.raises(OrdsRefused) as refused:
        ask(ords)
    assert (refused.value.status, refused.value.reason) == (401, "ords_unauthorized")
    assert str(refused.value) == "토큰이 유효하지 않거나 만료됨"
    return ords.refusals[-1]


def test_an_expired_assertion_is_refused(ords):
    # ORDS' clock past the assertion's 60 seconds and the profile's allowed skew.
    ords.verifier.clock_offset = 60 + ords.verifier.allowed_skew + 1
    assert refused_reason(ords) == "expired"


def test_an_assertion_for_another_audience_is_refused(ords):
    ords.verifier.audience = "https://other-ords.kb.test"
    assert refused_reason(ords) == "audience"


def test_an_assertion_from_another_issuer_is_refused(ords):
    ords.verifier.issuer = "https://someone-else.test"
    assert refused_reason(ords) == "issuer"


def test_an_assertion_signed_by_a_key_the_jwks_does_not_list_is_refused(ords, tmp_path):
    other = signing_keys(signing_key_file_generated(tmp_path / "other.pem"), [])
    with ExitStack() as stack:
        ords.verifier.jwks_url = jwks_served(other.jwks, stack)
        assert refused_reason(ords) == "unknown_kid"


def test_a_replayed_assertion_is_refused(ords, monkeypatch):
    ask(ords)
    replayed = ords.received[0].headers["Authorization"]
    again = httpx.post(
        ords.url, json={"prompt": "x", "limit": 1}, headers={"Authorization": replayed}
    )
    assert again.status_code == 401 and ords.refusals == ["replayed"]
    # Were hyperbook ever to reuse a jti, the tool would say so as a refusal, not fail.
    same = types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex="one-jti-twice"))
    monkeypatch.setattr("kb.assertions.uuid", same)
    ask(ords)
    assert refused_reason(ords) == "replayed"


# --- the signing keys and the JWKS ------------------------------------------------------------


def test_the_jwks_holds_public_keys_only_with_kid_alg_and_use(settings, tmp_path):
    previous = key_file(
        tmp_path, "old.pem", rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    both = signing_keys(settings.KB_ASSERTION_SIGNING_KEY_FILE, [previous])
    published = both.jwks()["keys"]
    assert [k["alg"] for k in published] == ["RS256", "RS256"]
    for jwk in published:
        assert set(jwk) == {"kty", "n", "e", "kid", "use", "alg"}
        assert jwk["kty"] == "RSA" and jwk["use"] == "sig" and jwk["kid"]
    assert published[0]["kid"] != published[1]["kid"]
    assert published[1]["kid"] == key_from_file(previous, setting="x").kid


# RFC 7638 §3.1: an RSA key and its thumbprint.
RFC7638_N = (
    "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPeb"
    "WKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQ"
    "MicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2Nc"
    "Rwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
)


def test_an_rsa_kid_is_the_rfc_7638_thumbprint():
    jwk = {"kty": "RSA", "n": RFC7638_N, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"}
    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_previous_key_may_be_published_from_its_public_half(tmp_path, settings):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = tmp_path / "old.pub.pem"
    public.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    keys = signing_keys(settings.KB_ASSERTION_SIGNING_KEY_FILE, [str(public)])
    assert keys.previous[0].private_key is None
    from_private = key_from_file(key_file(tmp_path, "o.pem", private), setting="x")
    assert keys.previous[0].kid == from_private.kid


@pytest.mark.parametrize(
    "problem", ["missing", "rsa_1024", "rsa_4104", "p384", "public_only", "garbage"]
)
def test_an_unusable_signing_key_names_the_setting_and_the_file(tmp_path, problem):
    path = tmp_path / "key.pem"
    if problem.startswith("rsa_"):
        bits = int(problem.removeprefix("rsa_"))
        key_file(
            tmp_path, "key.pem", rsa.generate_private_key(public_exponent=65537, key_size=bits)
        )
    elif problem == "p384":
        key_file(tmp_path, "key.pem", ec.generate_private_key(ec.SECP384R1()))
    elif problem == "public_only":
        private = ec.generate_private_key(ec.SECP256R1())
        path.write_bytes(
            private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    elif problem == "garbage":
        path.write_text("not a key")
    with pytest.raises(ImproperlyConfigured, match="KB_ASSERTION_SIGNING_KEY_FILE") as error:
        signing_keys(str(path), [])
    assert "PRIVATE" not in str(error.value)
    if problem.startswith("rsa_"):
        assert "must have 2048 to 4096 bits" in str(error.value)


@pytest.mark.parametrize("bits", [2048, 4096])
def test_an_rsa_key_of_2048_to_4096_bits_signs_rs256(tmp_path, bits):
    private = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    keys = signing_keys(key_file(tmp_path, f"rsa{bits}.pem", private), [])
    assert ords_verifiable(keys) is keys
    assert keys.current.algorithm == "RS256" and keys.current.public_jwk["kty"] == "RSA"


def test_the_local_key_is_generated_once_owner_only(tmp_path):
    path = signing_key_file_generated(tmp_path / "var" / "kb_assertion_rsa_key.pem")
    first = path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert signing_key_file_generated(path).read_bytes() == first
    key = key_from_file(str(path), setting="x")
    assert key.algorithm == "RS256" and key.private_key.key_size == 3072
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no draft left behind


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
    ords.server.respond = lambda r: json_reply(
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
    ords.server.respond = lambda r: json_reply({"items": ORDS_ITEMS[:1], "hasMore": True})
    assert ask(ords, limit=5)["truncated"] is True


def test_an_empty_collection_is_an_empty_answer(ords):
    ords.server.respond = lambda r: json_reply({"items": [], "hasMore": False})
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
    ords.server.respond = lambda r: json_reply({"code": "Unauthorized"}, status=status)
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
    ords.server.respond = lambda r: json_reply(
        {"message": f"secret detail {bearer_of(r)}"}, status=status
    )
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert (error.value.reason, error.value.status) == (reason, status)
    assert bearer_of(ords.received[0]) not in str(error.value)
    assert "secret detail" not in str(error.value)
    assert len(ords.received) == 1


def test_a_slow_ords_times_out_once(ords):
    ords.server.respond = lambda r: (time.sleep(3), json_reply({"items": []}))[1]
    started = time.monotonic()
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "timeout"
    assert time.monotonic() - started < 2
    assert len(ords.received) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_and_is_not_followed(ords, status):
    elsewhere = LoopbackServer(respond=lambda r: json_reply({"items": ORDS_ITEMS}))
    with elsewhere.running() as other:
        ords.server.respond = lambda r: (status, {"Location": f"{other}/steal"}, b"")
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
    ords.server.respond = lambda r: (200, {"Content-Type": "application/json"}, body)
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "invalid_reply"


def test_a_huge_reply_is_cut_off(ords, monkeypatch):
    monkeypatch.setattr("kb.ords.REPLY_MAX_BYTES", 1000)
    ords.server.respond = lambda r: json_reply({"items": [{"x": "y" * 2000}]})
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "too_large"


def test_an_unreachable_ords_is_a_clear_error(keys):
    url = "http://127.0.0.1:9/ords/"
    config = OrdsConfig(url=url, timeout_seconds=1, identity=identity_for(url, keys))
    with pytest.raises(OrdsError) as error:
        ords_answer(prompt="x", limit=1, stakeholder=PLANNER, config=config)
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
    settings.KB_ASSERTION_ISSUER = ISSUER
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
    settings.ORDS_AUDIENCE = AUDIENCE
    settings.KB_ASSERTION_ISSUER = ISSUER
    return ords


def test_answer_question_asks_ords_as_the_stakeholder_for_its_delegation(kb, ords_backend):
    answer = answer_question(
        stakeholder_id="KB-M-001", prompt="전체 고객", limit=500, delegation_id=7
    )
    valid_answer(answer)
    (request,) = ords_backend.received
    assert request.json() == {"prompt": "전체 고객", "limit": 100}
    (claims,) = ords_backend.accepted
    assert (claims["sub"], claims["kb_role"], claims["kb_branch"]) == (
        "KB-M-001",
        "branch_manager",
        "BR-GN",
    )
    assert claims["act"] == {"sub": "7"}
    assert answer["stakeholder"] == {
        "id": "KB-M-001",
        "role": "branch_manager",
        "branch_id": "BR-GN",
    }
    assert answer["interpretation"]["source"] == "ords"


def test_a_suspended_stakeholder_is_refused_before_ords_is_asked(kb, ords_backend):
    with pytest.raises(PolicyRefused):
        answer_question(stakeholder_id="KB-P-099", prompt="전체 고객", limit=10)
    assert ords_backend.received == []


def test_warm_up_checks_the_ords_settings_without_calling_ords(kb, ords_backend, settings):
    warm_up()
    assert ords_backend.received == []
    settings.ORDS_SELECT_AI_URL = "http://ords.example.com/"
    with pytest.raises(ImproperlyConfigured, match="https"):
        warm_up()


def test_warm_up_refuses_the_removed_client_credential_and_says_what_replaces_it(
    kb, ords_backend, settings
):
    settings.ORDS_SELECT_AI_CLIENT_TOKEN = True
    with pytest.raises(ImproperlyConfigured) as refused:
        warm_up()
    message = str(refused.value)
    assert "ORDS_SELECT_AI_CLIENT_TOKEN" in message and "no longer used" in message
    assert "KB_ASSERTION_SIGNING_KEY_FILE" in message
    assert ords_backend.received == []


def test_the_issuer_is_the_resource_urls_origin_unless_named(ords_backend, settings):
    settings.KB_ASSERTION_ISSUER = ""
    settings.MCP_RESOURCE_URL = "https://kb.example.com:8443/mcp"
    assert ords_config().identity.issuer == "https://kb.example.com:8443"
    settings.KB_ASSERTION_ISSUER = "https://issuer.example.com"
    assert ords_config().identity.issuer == "https://issuer.example.com"
    settings.KB_ASSERTION_ISSUER, settings.MCP_RESOURCE_URL = "", ""
    with pytest.raises(ImproperlyConfigured, match="MCP_RESOURCE_URL or KB_ASSERTION_ISSUER"):
        ords_config()


def test_the_audience_is_the_ords_origin_unless_named(ords_backend, settings):
    settings.ORDS_AUDIENCE = ""
    settings.ORDS_SELECT_AI_URL = "https://ords.example.com:8181/ords/kb/select_ai/"
    assert ords_config().identity.audience == "https://ords.example.com:8181"
    settings.ORDS_AUDIENCE = "kb-ords"
    assert ords_config().identity.audience == "kb-ords"


@pytest.mark.parametrize("lifetime", [0, 301, "60", True])
def test_the_assertion_lifetime_is_short(ords_backend, settings, lifetime):
    settings.KB_ASSERTION_LIFETIME_SECONDS = lifetime
    with pytest.raises(ImproperlyConfigured, match="KB_ASSERTION_LIFETIME_SECONDS"):
        ords_config()


@pytest.mark.parametrize(
    "missing", ["ORDS_TOKEN_EXCHANGE_CLIENT_ID", "ORDS_TOKEN_EXCHANGE_CLIENT_SECRET"]
)
def test_the_exchange_needs_its_client_credential(ords_backend, settings, missing):
    settings.ORDS_TOKEN_EXCHANGE_URL = "https://sts.example.com/token"
    settings.ORDS_TOKEN_EXCHANGE_CLIENT_ID = STS_CLIENT_ID
    settings.ORDS_TOKEN_EXCHANGE_CLIENT_SECRET = STS_CLIENT_SECRET
    setattr(settings, missing, "")
    with pytest.raises(ImproperlyConfigured, match=missing) as refused:
        ords_config()
    assert STS_CLIENT_SECRET not in str(refused.value)


@pytest.mark.parametrize(
    "setting", ["KB_ASSERTION_SIGNING_KEY_FILE", "KB_ASSERTION_PREVIOUS_KEY_FILES"]
)
@pytest.mark.parametrize(
    "make, algorithm",
    [
        (ed25519.Ed25519PrivateKey.generate, "EdDSA"),
        (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256"),
    ],
)
def test_warm_up_refuses_a_key_ords_cannot_verify_unless_an_sts_gets_the_assertion(
    kb, ords_backend, settings, tmp_path, setting, make, algorithm
):
    path = key_file(tmp_path, "not-rsa.pem", make())
    if setting == "KB_ASSERTION_SIGNING_KEY_FILE":
        settings.KB_ASSERTION_SIGNING_KEY_FILE = path
    else:  # ORDS reads every key of the JWKS, the earlier ones too
        settings.KB_ASSERTION_PREVIOUS_KEY_FILES = [path]
    with pytest.raises(ImproperlyConfigured) as refused:
        warm_up()
    message = str(refused.value)
    assert message.startswith(f"{setting}: {path} is an {algorithm} key")
    assert "ORDS verifies RS256, RS384 or RS512 only" in message
    assert "RSA key of 2048 to 4096 bits" in message and "ORDS_TOKEN_EXCHANGE_URL" in message
    assert ords_backend.received == []
    # The assertion goes to an STS instead: the same key is fine.
    settings.ORDS_TOKEN_EXCHANGE_URL = "https://sts.example.com/token"
    settings.ORDS_TOKEN_EXCHANGE_CLIENT_ID = STS_CLIENT_ID
    settings.ORDS_TOKEN_EXCHANGE_CLIENT_SECRET = STS_CLIENT_SECRET
    warm_up()
    assert ords_config().identity.exchange is not None


# --- the RFC 8693 exchange --------------------------------------------------------------------


@pytest.fixture
def sts(ords, keys):
    with ExitStack() as stack:
        verifier = AssertionVerifier(jwks_url=ords.verifier.jwks_url)
        stand_in = StsStandIn(verifier=verifier, ords=ords)
        started(stand_in, stack)
        exchange = TokenExchange(
            url=f"{stand_in.url}/oauth2/token",
            client_id=STS_CLIENT_ID,
            client_secret=STS_CLIENT_SECRET,
            timeout_seconds=1,
        )
        ords.config = OrdsConfig(
            url=ords.url, timeout_seconds=1, identity=identity_for(ords.url, keys, exchange)
        )
        yield stand_in


def test_the_sts_gets_the_rfc_8693_form_and_ords_gets_the_sts_token(ords, sts):
    answer = valid_answer(ask(ords, delegation_id=5))
    assert answer["row_count"] == 2
    (exchange,) = sts.received
    assert exchange.path == "/oauth2/token" and sts.problems == []
    assert len(sts.verifier.seen_jti) == 1  # the STS verified hyperbook's assertion
    (request,) = ords.received
    assert bearer_of(request) == sts.issued[0]
    assert ords.accepted == [{"sub": "KB-P-001", "scope": TOOL_NAME, "via": "sts"}]
    # The assertion went to the STS only; the STS's client secret to neither ORDS nor a message.
    assertion = exchange.body.decode()
    assert "subject_token=" in assertion
    assert STS_CLIENT_SECRET not in ords.recorded_text()


def test_an_exchanged_token_is_reused_per_stakeholder_until_shortly_before_it_expires(ords, sts):
    ask(ords)
    ask(ords)
    assert len(sts.received) == 1 and len(ords.received) == 2
    ask(ords, stakeholder=MANAGER)
    assert len(sts.received) == 2
    assert ords.accepted[-1]["sub"] == "KB-M-001"
    sts.expires_in = 10  # no longer than the safety margin: never reused
    ask(ords, stakeholder=MANAGER, delegation_id=9)
    ask(ords, stakeholder=MANAGER, delegation_id=9)
    assert len(sts.received) == 4


def test_a_token_ords_refuses_is_not_reused(ords, sts):
    ask(ords)
    ords.sts_tokens.clear()  # ORDS no longer accepts what the STS issued
    with pytest.raises(OrdsRefused):
        ask(ords)
    ask(ords)  # exchanged again, not the refused token once more
    assert len(sts.received) == 2


@pytest.mark.parametrize("status", [400, 401, 403])
def test_a_refused_exchange_is_a_refusal_and_ords_is_not_asked(ords, sts, status):
    sts.refuse_with = status
    with pytest.raises(OrdsRefused) as refused:
        ask(ords)
    assert refused.value.reason == "exchange_refused"
    assert ords.received == []


def test_a_failing_sts_is_a_clear_error(ords, sts):
    sts.server.respond = lambda r: json_reply({"access_token": "x y", "token_type": "Bearer"})
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "exchange_failed"
    sts.server.respond = lambda r: (302, {"Location": "http://127.0.0.1:9/"}, b"")
    with pytest.raises(OrdsError) as error:
        ask(ords)
    assert error.value.reason == "exchange_redirect"
    assert ords.received == []
