"""End to end with KB_QUERY_BACKEND=ords: a real hyperbook server process, an ORDS stand-in on
loopback that fetches that server's /.well-known/jwks.json and verifies every assertion as ORDS'
JWT profile does (RS256/RS384/RS512 only), and canary VPD tokens that must never reach it."""

import http.client
import time
import uuid
from contextlib import ExitStack
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.utils import timezone

from kb.assertions import signing_key_file_generated, signing_keys
from kb.models import Stakeholder
from registry.services import delegation_register
from tests.kb.conftest import expected_customer_ids
from tests.kb.ords_stand_in import (
    AUDIENCE,
    ISSUER,
    STS_ALGORITHMS,
    STS_CLIENT_ID,
    STS_CLIENT_SECRET,
    AssertionVerifier,
    OrdsStandIn,
    Refused,
    StsStandIn,
    jwks_served,
    started,
)
from tests.live import live_server
from tests.mcpserver.conftest import Server, call
from tests.mcpserver.test_canary_tokens import database_text

pytestmark = [pytest.mark.db, pytest.mark.slow]

CANARY_PLANNER = "CANARYordsPlanner7Q2mZx9LwP4vRt8YbN3cKd6"
CANARY_MANAGER = "CANARYordsManager5Ww2Xq8Lm3Pz7Nv4Rk9Tb6"
PRIVATE_JWK_MEMBERS = {"d", "p", "q", "dp", "dq", "qi", "k"}


def rows_of(sub: str) -> list[dict]:
    """What ORDS' VPD would let `sub` see, from the dataset files (never hyperbook's code)."""
    return [{"customer_id": c} for c in sorted(expected_customer_ids(sub))]


@pytest.fixture(scope="module")
def canaries(world, django_db_blocker) -> dict[str, int]:
    """Canary tokens for a planner and a branch manager: stakeholder id -> delegation id."""
    with django_db_blocker.unblock():
        expires = timezone.now() + timedelta(days=1)
        delegations = {}
        for stakeholder_id, canary in (("KB-P-001", CANARY_PLANNER), ("KB-M-001", CANARY_MANAGER)):
            delegation = delegation_register(
                raw_token=canary,
                stakeholder=Stakeholder.objects.get(stakeholder_id=stakeholder_id),
                agent_name="ords-canary",
                expires_at=expires,
            )
            delegations[stakeholder_id] = delegation.pk
    return delegations


def ords_env(ords: OrdsStandIn, **extra) -> dict:
    return {
        "KB_QUERY_BACKEND": "ords",
        "ORDS_SELECT_AI_URL": ords.url,
        "ORDS_SELECT_AI_TIMEOUT_SECONDS": "5",
        "ORDS_AUDIENCE": AUDIENCE,
        "KB_ASSERTION_ISSUER": ISSUER,
        "MCP_RATE_LIMIT": "10000/minute",
        **extra,
    }


@pytest.fixture(scope="module")
def ords(world):
    with ExitStack() as stack:
        stand_in = OrdsStandIn(verifier=AssertionVerifier(), rows_for=rows_of)
        started(stand_in, stack)
        yield stand_in


@pytest.fixture(scope="module")
def hyperbook(ords, canaries, tmp_path_factory):
    log = tmp_path_factory.mktemp("ords-e2e") / "server.log"
    with live_server(log, ords_env(ords)) as url:
        ords.verifier.jwks_url = f"{url}/.well-known/jwks.json"
        yield Server(url=url, log=log)


@pytest.fixture
def verifier(ords):
    """The stand-in's expectations, put back after a test that changes them."""
    saved = ords.verifier
    ords.verifier = AssertionVerifier(jwks_url=saved.jwks_url)
    yield ords.verifier
    ords.verifier = saved


def tool_result(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["result"]


def customer_ids(result: dict) -> set[str]:
    assert result.get("isError") is not True, result
    return {row["customer_id"] for row in result["structuredContent"]["rows"]}


def ed25519_key_file(path) -> str:
    """A key ORDS cannot verify, but an STS may."""
    path.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(path)


def test_a_planner_and_a_branch_manager_each_get_the_rows_of_their_own_sub(
    hyperbook, ords, canaries, verifier
):
    planner = tool_result(hyperbook.post(call("담당 고객 목록", 100), CANARY_PLANNER))
    manager = tool_result(hyperbook.post(call("지점 고객 목록", 100), CANARY_MANAGER))
    assert customer_ids(planner) == expected_customer_ids("KB-P-001")
    assert customer_ids(manager) == expected_customer_ids("KB-M-001")
    assert customer_ids(planner) != customer_ids(manager)
    first, second = ords.accepted[-2:]
    assert (first["sub"], first["kb_role"], first["kb_branch"]) == ("KB-P-001", "planner", "BR-GN")
    assert (second["sub"], second["kb_role"]) == ("KB-M-001", "branch_manager")
    assert first["act"] == {"sub": str(canaries["KB-P-001"])}
    assert second["act"] == {"sub": str(canaries["KB-M-001"])}
    assert first["jti"] != second["jti"]
    for request in ords.received[-2:]:
        header = jwt.get_unverified_header(request.headers["Authorization"].split()[1])
        assert header["alg"] == "RS256" and header["typ"] == "at+jwt"


def test_no_canary_token_and_no_stakeholder_header_reach_ords(
    hyperbook, ords, world, verifier, django_db_blocker
):
    responses = [
        hyperbook.post(call("담당 고객 목록", 5), canary)
        for canary in (CANARY_PLANNER, CANARY_MANAGER)
    ]
    verifier.audience = "https://another-ords.kb.test"  # and a refused one
    responses.append(hyperbook.post(call("담당 고객 목록", 5), CANARY_PLANNER))
    recorded = ords.recorded_text()
    assert ords.received, "ORDS was never asked"
    assert CANARY_PLANNER not in recorded and CANARY_MANAGER not in recorded
    assert not any(token in recorded for token in world.tokens.values())
    assert "x-kb-stakeholder-id" not in recorded.lower()
    assertions = [r.headers["Authorization"].removeprefix("Bearer ") for r in ords.received]
    assert all(a.startswith("ey") for a in assertions)  # a JWT, not a VPD token
    # Neither the callers' tokens nor the assertions are kept or shown anywhere.
    bodies = "\n".join(r.text + repr(dict(r.headers)) for r in responses)
    log = hyperbook.log.read_text(encoding="utf-8", errors="replace")
    with django_db_blocker.unblock():
        stored = database_text()
    for secret in (CANARY_PLANNER, CANARY_MANAGER, *assertions):
        assert secret not in bodies and secret not in log and secret not in stored


@pytest.mark.parametrize(
    "fault, reason",
    [
        ({"clock_offset": 66}, "expired"),  # past the 60 s lifetime and the profile's 5 s skew
        ({"audience": "https://another-ords.kb.test"}, "audience"),
        ({"issuer": "https://not-hyperbook.test"}, "issuer"),
        ({"jwks_url": "other"}, "unknown_kid"),
    ],
)
def test_an_assertion_ords_refuses_is_a_clear_tool_error_not_a_500(
    hyperbook, ords, verifier, tmp_path, fault, reason
):
    with ExitStack() as stack:
        if fault.get("jwks_url") == "other":  # a JWKS without hyperbook's key
            other = signing_keys(str(signing_key_file_generated(tmp_path / "other.pem")), [])
            fault = {"jwks_url": jwks_served(other.jwks, stack)}
        for name, value in fault.items():
            setattr(verifier, name, value)
        response = hyperbook.post(call("담당 고객 목록", 5), CANARY_PLANNER)
    result = tool_result(response)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "토큰이 유효하지 않거나 만료됨"
    assert ords.refusals[-1] == reason


def test_the_jwks_carries_public_keys_only(hyperbook):
    response = httpx.get(f"{hyperbook.url}/.well-known/jwks.json", timeout=10)
    assert response.status_code == 200
    (key,) = response.json()["keys"]
    assert set(key) == {"kty", "n", "e", "kid", "use", "alg"}
    assert (key["kty"], key["use"], key["alg"]) == ("RSA", "sig", "RS256") and key["kid"]
    assert not PRIVATE_JWK_MEMBERS & set(key)


HMAC_SECRET = "a-secret-shared-with-nobody-0123456789abcdef"  # noqa: S105


@pytest.mark.parametrize("algorithm", ["EdDSA", "HS256", "none"])
def test_ords_refuses_a_token_under_hyperbooks_kid_in_an_algorithm_it_does_not_take(
    hyperbook, ords, verifier, algorithm
):
    """Under the kid of the key the live server publishes, so that only the algorithm is wrong."""
    kid = httpx.get(f"{hyperbook.url}/.well-known/jwks.json", timeout=10).json()["keys"][0]["kid"]
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "KB-P-001", "iat": now, "exp": now + 60}
    key = {
        "EdDSA": ed25519.Ed25519PrivateKey.generate(),
        "HS256": HMAC_SECRET,
        "none": None,
    }[algorithm]
    token = jwt.encode(
        {**claims, "jti": uuid.uuid4().hex},
        key,
        algorithm=algorithm,
        headers={"typ": "at+jwt", "kid": kid},
    )
    response = httpx.post(
        ords.url, json={"prompt": "x", "limit": 1}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert ords.refusals[-1] == "alg"


def test_a_key_ords_cannot_verify_stops_the_server_from_starting(ords, tmp_path):
    key = ed25519_key_file(tmp_path / "ed25519.pem")
    env = ords_env(ords, KB_ASSERTION_SIGNING_KEY_FILE=key)
    with pytest.raises(RuntimeError, match="server exited early"):
        with live_server(tmp_path / "refused.log", env):
            pass
    log = (tmp_path / "refused.log").read_text()
    assert f"KB_ASSERTION_SIGNING_KEY_FILE: {key} is an EdDSA key" in log
    assert "ORDS verifies RS256, RS384 or RS512 only" in log


def test_the_jwks_is_behind_the_well_known_host_check(hyperbook):
    parts = urlsplit(hyperbook.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.putrequest("GET", "/.well-known/jwks.json", skip_host=True)
        connection.putheader("Host", "evil.example")
        connection.endheaders()
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    assert response.status == 403
    assert b"keys" not in body


def test_after_a_rotation_new_assertions_verify_and_the_old_keys_last_ones_while_listed(
    ords, canaries, tmp_path
):
    old_key = signing_key_file_generated(tmp_path / "old.pem")
    new_key = signing_key_file_generated(tmp_path / "new.pem")
    saved = ords.verifier

    def served_with(env: dict, name: str):
        return live_server(tmp_path / f"{name}.log", ords_env(ords, **env))

    try:
        with served_with({"KB_ASSERTION_SIGNING_KEY_FILE": str(old_key)}, "before") as url:
            ords.verifier = AssertionVerifier(jwks_url=f"{url}/.well-known/jwks.json")
            result = tool_result(Server(url, tmp_path).post(call("담당 고객", 100), CANARY_PLANNER))
            assert customer_ids(result) == expected_customer_ids("KB-P-001")
            last_old = ords.received[-1].headers["Authorization"].removeprefix("Bearer ")
        rotated = {
            "KB_ASSERTION_SIGNING_KEY_FILE": str(new_key),
            "KB_ASSERTION_PREVIOUS_KEY_FILES": str(old_key),
        }
        with served_with(rotated, "rotated") as url:
            # Another ORDS node, which has not seen the old assertion yet.
            ords.verifier = AssertionVerifier(jwks_url=f"{url}/.well-known/jwks.json")
            assert ords.verifier.verify(last_old)["sub"] == "KB-P-001"
            result = tool_result(Server(url, tmp_path).post(call("담당 고객", 100), CANARY_PLANNER))
            assert customer_ids(result) == expected_customer_ids("KB-P-001")
            assert len(ords.verifier.keys) == 2
        with served_with({"KB_ASSERTION_SIGNING_KEY_FILE": str(new_key)}, "after") as url:
            ords.verifier = AssertionVerifier(jwks_url=f"{url}/.well-known/jwks.json")
            with pytest.raises(Refused) as refused:
                ords.verifier.verify(last_old)
            assert refused.value.reason == "unknown_kid"
    finally:
        ords.verifier = saved


def test_the_exchange_mode_sends_ords_the_sts_token_and_nothing_of_the_callers(
    ords, canaries, tmp_path
):
    secret_file = tmp_path / "sts-secret"
    secret_file.write_text(STS_CLIENT_SECRET)
    saved = ords.verifier
    with ExitStack() as stack:
        # An Ed25519 key: allowed here because the assertion goes to the STS, never to ORDS.
        sts = StsStandIn(verifier=AssertionVerifier(algorithms=STS_ALGORITHMS), ords=ords)
        started(sts, stack)
        env = {
            "ORDS_TOKEN_EXCHANGE_URL": f"{sts.url}/oauth2/token",
            "ORDS_TOKEN_EXCHANGE_CLIENT_ID": STS_CLIENT_ID,
            "ORDS_TOKEN_EXCHANGE_CLIENT_SECRET_FILE": str(secret_file),
            "KB_ASSERTION_SIGNING_KEY_FILE": ed25519_key_file(tmp_path / "sts-only.pem"),
        }
        url = stack.enter_context(live_server(tmp_path / "sts.log", ords_env(ords, **env)))
        sts.verifier.jwks_url = f"{url}/.well-known/jwks.json"
        ords.verifier = AssertionVerifier(jwks_url="http://127.0.0.1:9/")  # ORDS trusts the STS
        try:
            server = Server(url, tmp_path)
            before = len(ords.received)
            for _ in range(2):
                result = tool_result(server.post(call("담당 고객", 100), CANARY_PLANNER))
                assert customer_ids(result) == expected_customer_ids("KB-P-001")
        finally:
            ords.verifier = saved
    assert sts.problems == [] and len(sts.issued) == 1  # exchanged once, then reused
    (subject_token,) = parse_qs(sts.received[0].body.decode())["subject_token"]
    assert jwt.get_unverified_header(subject_token)["alg"] == "EdDSA"
    asked = ords.received[before:]
    assert [r.headers["Authorization"] for r in asked] == [f"Bearer {sts.issued[0]}"] * 2
    everything = ords.recorded_text() + "\n".join(
        repr(r.headers) + r.body.decode() for r in sts.received
    )
    assert CANARY_PLANNER not in everything
    assert STS_CLIENT_SECRET not in ords.recorded_text()


def test_without_a_usable_key_the_jwks_is_unavailable_and_names_nothing(world, tmp_path):
    missing = tmp_path / "missing.pem"
    with live_server(
        tmp_path / "no-key.log", {"KB_ASSERTION_SIGNING_KEY_FILE": str(missing)}
    ) as url:
        response = httpx.get(f"{url}/.well-known/jwks.json", timeout=10)
    assert response.status_code == 503
    assert response.json() == {"error": "signing keys unavailable"}
    assert "KB_ASSERTION_SIGNING_KEY_FILE" in (tmp_path / "no-key.log").read_text()
