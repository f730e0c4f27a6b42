"""Failed logins on both login pages, throttled by django-axes per account and per address, each
failure and each lock audited: the address is the socket's peer whatever a client claims, the
lockout page says when to try again in the page's language, a success clears only what it
answers for, and neither a password nor a name that matches no account is kept anywhere."""

import json
from datetime import timedelta

import pytest
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib.auth import authenticate, get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.test import RequestFactory
from django.utils import timezone

from audit.models import AuditEvent
from signin.views import lockout_page

pytestmark = pytest.mark.django_db

PAGES = ["/admin/login/", "/oauth/login/"]
PASSWORD = "right-Password-4821"
CANARY = "Canary-Secret-7f3e9q!"  # typed as a password, and as a name, where nothing may keep it
LIMIT = 5


@pytest.fixture(autouse=True)
def _fresh_audit_budget():
    cache.clear()  # the per-address audit budget counts in the cache, per window


@pytest.fixture
def ops(db):
    return get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)


@pytest.fixture
def kim(db):
    return get_user_model().objects.create_user("kim", password=PASSWORD, is_staff=True)


def attempt(client, page, username, password, address="10.1.0.1", **headers):
    return client.post(
        page, {"username": username, "password": password}, REMOTE_ADDR=address, **headers
    )


def signed_in(response) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def failures(**lookup) -> int:
    return sum(a.failures_since_start for a in AccessAttempt.objects.filter(**lookup))


def events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("sequence"))


# --- what is counted, and against what -----------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_failures_on_one_account_lock_it_from_every_address(client, page, ops, kim):
    for n in range(LIMIT - 1):
        assert attempt(client, page, "ops", "wrong", address=f"10.1.0.{n}").status_code == 200
    assert attempt(client, page, "ops", "wrong", address="10.1.0.9").status_code == 429

    # The right password, from an address that never failed: still locked.
    refused = attempt(client, page, "ops", PASSWORD, address="10.2.0.1")
    assert refused.status_code == 429 and not signed_in(refused)
    # Another account from that address is not.
    assert signed_in(attempt(client, page, "kim", PASSWORD, address="10.2.0.1"))


@pytest.mark.parametrize("page", PAGES)
def test_failures_from_one_address_lock_it_for_every_account(client, page, ops, kim):
    names = ["ops", "kim", "nobody", "admin", "root"]
    answers = [attempt(client, page, name, "wrong", address="10.3.0.1") for name in names]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 429]

    refused = attempt(client, page, "kim", PASSWORD, address="10.3.0.1")
    assert refused.status_code == 429 and not signed_in(refused)
    # The accounts themselves are not locked: from elsewhere, they log in.
    assert signed_in(attempt(client, page, "kim", PASSWORD, address="10.3.0.2"))


def test_both_pages_count_together(client, ops):
    for n in range(LIMIT - 1):
        attempt(client, PAGES[n % 2], "ops", "wrong", address=f"10.4.0.{n}")
    assert attempt(client, "/oauth/login/", "ops", "wrong", address="10.4.0.9").status_code == 429
    assert attempt(client, "/admin/login/", "ops", PASSWORD, address="10.4.1.1").status_code == 429


def test_a_spoofed_forwarded_for_does_not_dodge_the_address_lock(client, ops, kim):
    """The web server believes X-Forwarded-For only from FORWARDED_ALLOW_IPS (and then puts the
    client in REMOTE_ADDR); a header a client sends itself changes nothing here."""
    for n in range(LIMIT):
        response = attempt(
            client, "/admin/login/", f"guess{n}", "wrong", address="10.5.0.1",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}", HTTP_X_REAL_IP=f"198.51.100.{n}",
        )  # fmt: skip
    assert response.status_code == 429
    assert failures(ip_address="10.5.0.1") == LIMIT
    assert not AccessAttempt.objects.filter(ip_address__startswith="198.51.100.").exists()
    late = attempt(
        client, "/admin/login/", "kim", PASSWORD, address="10.5.0.1",
        HTTP_X_FORWARDED_FOR="203.0.113.77",
    )  # fmt: skip
    assert late.status_code == 429 and not signed_in(late)
    recorded = {e.client_address for e in events(AuditEvent.Action.AUTH_LOGIN_FAILED)}
    assert recorded == {"10.5.0.1"}


def test_a_login_refused_while_locked_is_not_counted_again(client, ops):
    for n in range(LIMIT):
        attempt(client, "/oauth/login/", "ops", "wrong", address=f"10.6.0.{n}")
    for _ in range(3):
        attempt(client, "/oauth/login/", "ops", "wrong", address="10.6.1.1")
    # Not counted: the locked account adds nothing to the new address (which stays open for
    # others), and the lock does not move on.
    assert failures(username="ops") == LIMIT
    assert failures(ip_address="10.6.1.1") == 0


def test_the_lock_lifts_after_the_cool_off(client, ops):
    for n in range(LIMIT):
        attempt(client, "/admin/login/", "ops", "wrong", address=f"10.7.0.{n}")
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=11))
    waiting = attempt(client, "/admin/login/", "ops", PASSWORD, address="10.7.1.1")
    assert waiting.status_code == 429
    assert 3 * 60 < int(waiting["Retry-After"]) <= 4 * 60
    assert "4분 뒤에 다시 시도하세요" in waiting.content.decode()

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert signed_in(attempt(client, "/admin/login/", "ops", PASSWORD, address="10.7.1.1"))


def test_a_sign_in_that_names_no_account_counts_against_its_address_only(ops):
    """Single sign-on's callback authenticates with no name: such failures from many addresses
    must not add up to a lock of every nameless sign-in."""
    factory = RequestFactory()

    def nameless(address):
        request = factory.get("/oidc/callback/", REMOTE_ADDR=address)
        assert authenticate(request, nonce="n", code_verifier="v") is None
        return request

    for n in range(LIMIT + 2):
        nameless(f"10.8.0.{n}")
    fresh = factory.get("/oidc/callback/", REMOTE_ADDR="10.8.1.1")
    assert AxesProxyHandler.is_allowed(fresh, {"username": None})
    for _ in range(LIMIT):
        nameless("10.8.2.2")
    again = factory.get("/oidc/callback/?code=the-providers-code&state=s", REMOTE_ADDR="10.8.2.2")
    assert not AxesProxyHandler.is_allowed(again, {"username": None})
    page = lockout_page(again)
    assert page.status_code == 429
    # Its way back is the login page, not the callback's address with the provider's code in it.
    assert 'href="/oauth/login/"' in page.content.decode()
    assert "the-providers-code" not in page.content.decode()
    assert events(AuditEvent.Action.AUTH_LOGIN_FAILED) == []  # the SSO code audits its refusals
    assert len(events(AuditEvent.Action.AUTH_LOCKED_OUT)) == 1


# --- the lockout page ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "says"),
    [
        (None, ["로그인 잠김", "15분 뒤에 다시 시도하세요", "운영자에게 문의하세요"]),
        ("en", ["Sign-in locked", "Try again in 15 minutes", "ask an operator"]),
    ],
)
@pytest.mark.parametrize("page", PAGES)
def test_the_lockout_page_says_when_to_try_again(client, ops, page, language, says):
    headers = {"HTTP_ACCEPT_LANGUAGE": language} if language else {}
    for n in range(LIMIT):
        response = attempt(client, page, "ops", "wrong", address=f"10.9.0.{n}", **headers)
    assert response.status_code == 429
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60
    assert "no-store" in response["Cache-Control"]
    text = response.content.decode()
    assert all(words in text for words in says), text
    assert 'id="site-name"' in text and 'id="lockout"' in text  # the admin's look
    assert f'href="{page}"' in text  # back to the page it came from
    assert 'name="password"' not in text


# --- a success -----------------------------------------------------------------------------------


def test_a_success_clears_the_accounts_own_failures(client, ops):
    for _ in range(LIMIT - 1):
        attempt(client, "/oauth/login/", "ops", "wrong", address="10.10.0.1")
    assert signed_in(attempt(client, "/oauth/login/", "ops", PASSWORD, address="10.10.0.1"))
    assert failures(username="ops") == 0
    for _ in range(LIMIT - 1):
        assert (
            attempt(client, "/oauth/login/", "ops", "wrong", address="10.10.0.1").status_code == 200
        )


def test_a_success_does_not_clear_failures_at_other_accounts_from_the_same_address(
    client, ops, kim
):
    """A guesser with an account of their own cannot sign in between guesses to start again."""
    for _ in range(LIMIT - 1):
        attempt(client, "/admin/login/", "ops", "wrong", address="10.11.0.1")
    assert signed_in(attempt(client, "/admin/login/", "kim", PASSWORD, address="10.11.0.1"))
    client.logout()
    assert failures(username="ops") == LIMIT - 1
    assert attempt(client, "/admin/login/", "ops", "wrong", address="10.11.0.1").status_code == 429


def test_an_operator_unlocks_an_account(client, ops):
    for n in range(LIMIT):
        attempt(client, "/admin/login/", "ops", "wrong", address=f"10.12.0.{n}")
    call_command("axes_reset_username", "ops", verbosity=0)
    assert signed_in(attempt(client, "/admin/login/", "ops", PASSWORD, address="10.12.1.1"))


# --- the audit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_every_failure_and_the_lock_are_audited_without_a_password(client, ops, page, caplog):
    attempt(client, page, "ops", CANARY, address="10.13.0.1", HTTP_USER_AGENT="guesser/1.0")
    attempt(client, page, CANARY, CANARY, address="10.13.0.1")  # a password in the name field
    for _ in range(LIMIT - 2):
        attempt(client, page, "nobody-here", "wrong", address="10.13.0.1")
    attempt(client, page, "ops", "wrong", address="10.13.0.1")  # refused: the address is locked

    failed = events(AuditEvent.Action.AUTH_LOGIN_FAILED)
    assert [e.detail for e in failed] == ["password"] * LIMIT + ["locked_out"]
    assert [e.http_status for e in failed] == [200] * (LIMIT - 1) + [429, 429]
    assert failed[-1].outcome == AuditEvent.Outcome.RATE_LIMITED
    assert {e.client_address for e in failed} == {"10.13.0.1"}
    assert {e.changes["page"] for e in failed} == {page}
    assert failed[0].target == "user:ops" and failed[0].changes["account"] == "ops"
    assert failed[0].user_agent == "guesser/1.0"
    assert failed[1].target == "" and failed[1].changes["account"] == "unknown"
    assert failed[2].changes["account"] == "unknown"  # a name that matches no account, either

    (lock,) = events(AuditEvent.Action.AUTH_LOCKED_OUT)
    assert lock.outcome == AuditEvent.Outcome.RATE_LIMITED and lock.http_status == 429
    assert lock.changes["locked"] == ["address"]
    assert lock.changes["failure_limit"] == LIMIT and lock.changes["cooloff_minutes"] == 15
    assert lock.client_address == "10.13.0.1" and lock.target == ""
    assert lock.sequence > failed[LIMIT - 1].sequence  # after the failure that began it

    # Neither the canary nor a name that matches no account is kept: not in the audit, not in
    # axes' table, not in the log.
    kept = json.dumps(list(AuditEvent.objects.values()), default=str)
    kept += json.dumps(list(AccessAttempt.objects.values()), default=str)
    for secret in (CANARY, "nobody-here", "wrong"):
        assert secret not in kept
        assert secret not in caplog.text
    assert all(
        a.username == "ops" or a.username.startswith("unknown:")
        for a in AccessAttempt.objects.all()
    )


def test_an_account_lock_is_audited_naming_the_account(client, ops):
    for n in range(LIMIT):
        attempt(client, "/oauth/login/", "ops", "wrong", address=f"10.14.0.{n}")
    (lock,) = events(AuditEvent.Action.AUTH_LOCKED_OUT)
    assert lock.changes["locked"] == ["account"]
    assert lock.target == "user:ops" and lock.changes["account"] == "ops"
    assert lock.changes["page"] == "/oauth/login/"


def test_one_address_cannot_flood_the_log_but_every_lock_is_recorded(client, ops, settings):
    settings.AUDIT_REFUSALS_PER_ADDRESS = 2
    settings.AUDIT_REFUSAL_WINDOW_SECONDS = 3600  # one window for the whole test
    for n in range(LIMIT + 6):
        attempt(client, "/admin/login/", f"name{n}", "wrong", address="10.15.0.1")
    failed = events(AuditEvent.Action.AUTH_LOGIN_FAILED)
    assert len(failed) == 3
    assert failed[-1].detail.endswith("budget reached, rest of window not recorded")
    assert len(events(AuditEvent.Action.AUTH_LOCKED_OUT)) == 1  # past the budget, still there
    # Another address has its own budget.
    attempt(client, "/admin/login/", "ops", "wrong", address="10.15.0.2")
    assert len(events(AuditEvent.Action.AUTH_LOGIN_FAILED)) == 4


def test_a_token_pasted_into_the_user_agent_stays_out_of_the_audit(client, ops):
    canary = "hbvpd_" + "UserAgentCanaryToken0123456789abcdefghijk"
    attempt(client, "/oauth/login/", "ops", "wrong-password", HTTP_USER_AGENT=f"agent {canary}")
    (failed,) = events(AuditEvent.Action.AUTH_LOGIN_FAILED)
    assert failed.user_agent == "agent [redacted]"
    assert canary not in repr(AuditEvent.objects.values_list())
