"""A staff account's authenticator app (TOTP): added only once a code it shows is typed, asked for
by both login pages from then on (a missing or wrong code failing like a wrong password: counted,
audited, answered alike), removed with the password or a current code, and, with
LOGIN_REQUIRE_TOTP, required of password sessions before any other page, but never of single
sign-on ones."""

import time
from base64 import b32encode

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

PAGES = ["/admin/login/", "/oauth/login/"]
PASSWORD = "right-Password-4821"
SETUP = "/oauth/second-factor/"


@pytest.fixture(autouse=True)
def _no_waiting(settings):
    cache.clear()  # the audit budget
    # django-otp makes a device wait 1, 2, 4… s after each wrong code; these tests type a right
    # one straight after a wrong one. (The login's own throttle is django-axes'.)
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


@pytest.fixture
def ops(db):
    return get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)


@pytest.fixture
def with_app(ops):
    return TOTPDevice.objects.create(user=ops, name="hyperbook", confirmed=True)


def code_for(device: TOTPDevice) -> str:
    """The app's code now, or the next step's when now's was used already."""
    device.refresh_from_db()
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    now = time.time()
    totp.time = now
    if totp.t() <= device.last_t:
        totp.time = now + device.step * (device.last_t + 1 - totp.t())
    return f"{totp.token():0{device.digits}d}"


def wrong_code_for(device: TOTPDevice) -> str:
    device.refresh_from_db()
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    near = set()
    for offset in range(-3, 4):
        totp.time = time.time() + offset * device.step
        near.add(f"{totp.token():0{device.digits}d}")
    return next(c for c in (f"{n:06d}" for n in range(10)) if c not in near)


def log_in(client, page, code="", password=PASSWORD, address="10.20.0.1"):
    data = {"username": "ops", "password": password, "otp_token": code}
    return client.post(page, data, REMOTE_ADDR=address)


def signed_in(response) -> bool:
    return response.status_code == 302 and "sessionid" in response.cookies


def error_note(response) -> str:
    text = response.content.decode()
    start = text.index('class="errornote"')
    return text[start : text.index("</p>", start)]


# --- adding one ----------------------------------------------------------------------------------


def test_an_app_is_added_only_once_a_code_it_shows_is_typed(client, ops):
    client.force_login(ops)
    page = client.get(SETUP)
    assert page.status_code == 200
    pending = TOTPDevice.objects.get(user=ops)
    assert not pending.confirmed
    text = page.content.decode()
    assert '<svg width="' in text  # the QR code, inline
    secret = b32encode(pending.bin_key).decode().rstrip("=")
    shown = text.split('id="second-factor-secret">')[1].split("<")[0]
    assert shown.replace(" ", "") == secret
    assert "no-store" in page["Cache-Control"]
    # Reloaded, the same secret (the code already scanned still works).
    assert shown in client.get(SETUP).content.decode()

    refused = client.post(SETUP, {"code": wrong_code_for(pending)})
    assert refused.status_code == 400
    assert not TOTPDevice.objects.filter(user=ops, confirmed=True).exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.TOTP_DEVICE_ADDED).exists()

    confirmed = client.post(SETUP, {"code": code_for(pending)})
    assert confirmed.status_code == 302
    device = TOTPDevice.objects.get(user=ops)
    assert device.confirmed and device.pk == pending.pk
    assert client.session[DEVICE_ID_SESSION_KEY] == device.persistent_id  # this session verified
    (added,) = AuditEvent.objects.filter(action=AuditEvent.Action.TOTP_DEVICE_ADDED)
    assert (added.actor, added.target) == ("ops", "user:ops")
    assert secret not in str(added.changes) and device.key not in str(added.changes)

    after = client.get(SETUP).content.decode()
    assert 'id="second-factor-on"' in after
    assert secret[:8] not in after and "<svg width=" not in after  # never shown again


def test_the_page_is_staff_only_and_linked_from_the_admin(client, ops):
    planner = get_user_model().objects.create_user("planner", password=PASSWORD)
    client.force_login(planner)
    assert client.get(SETUP).status_code == 403
    assert not TOTPDevice.objects.exists()
    client.force_login(ops)
    admin = client.get("/admin/").content.decode()
    assert f'id="second-factor-link" href="{SETUP}"' in admin or (
        'id="second-factor-link"' in admin and f'href="{SETUP}"' in admin
    )


def test_the_page_speaks_english_on_request(client, ops):
    client.force_login(ops)
    text = client.get(SETUP, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Authenticator app" in text and "인증" not in text


# --- logging in with it --------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_both_login_pages_offer_the_code_field(client, page):
    text = client.get(page).content.decode()
    assert 'name="otp_token"' in text and 'autocomplete="one-time-code"' in text


@pytest.mark.parametrize("page", PAGES)
def test_once_added_the_login_needs_the_code(client, with_app, page):
    missing = log_in(client, page)
    wrong = log_in(client, page, code=wrong_code_for(with_app))
    bad_password = log_in(client, page, code=code_for(with_app), password="wrong")
    for refused in (missing, wrong, bad_password):
        assert refused.status_code == 200 and not signed_in(refused)
    # The same answer whichever was wrong: it never says the password was right.
    assert error_note(missing) == error_note(wrong) == error_note(bad_password)

    right = log_in(client, page, code=code_for(with_app))
    assert signed_in(right)
    assert client.session[DEVICE_ID_SESSION_KEY] == with_app.persistent_id


def test_a_missing_or_wrong_code_is_a_failed_login_counted_and_audited(client, with_app):
    log_in(client, "/admin/login/")
    log_in(client, "/oauth/login/", code=wrong_code_for(with_app))
    assert sum(a.failures_since_start for a in AccessAttempt.objects.filter(username="ops")) == 2
    failed = AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_LOGIN_FAILED).order_by(
        "sequence"
    )
    assert [(e.detail, e.target, e.changes["page"]) for e in failed] == [
        ("code", "user:ops", "/admin/login/"),
        ("code", "user:ops", "/oauth/login/"),
    ]


def test_wrong_codes_lock_the_account_like_wrong_passwords(client, with_app):
    for n in range(5):
        response = log_in(
            client, "/admin/login/", code=wrong_code_for(with_app), address=f"10.21.0.{n}"
        )
    assert response.status_code == 429
    late = log_in(client, "/admin/login/", code=code_for(with_app), address="10.21.1.1")
    assert late.status_code == 429 and not signed_in(late)
    assert AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_LOCKED_OUT).count() == 1


# --- removing it ---------------------------------------------------------------------------------


def test_removing_takes_the_password_or_a_current_code(client, ops, with_app):
    client.force_login(ops)
    remove = f"{SETUP}remove/"
    refused = client.post(remove, {"proof": "not-the-password"}, REMOTE_ADDR="10.22.0.1")
    assert refused.status_code == 400
    assert TOTPDevice.objects.filter(user=ops, confirmed=True).exists()
    failed = AuditEvent.objects.get(action=AuditEvent.Action.AUTH_LOGIN_FAILED)
    assert (failed.detail, failed.changes["page"]) == ("password", remove)
    assert "not-the-password" not in str(AccessAttempt.objects.values())

    assert client.post(remove, {"proof": wrong_code_for(with_app)}).status_code == 400
    assert AuditEvent.objects.filter(detail="code").count() == 1

    assert client.post(remove, {"proof": PASSWORD}).status_code == 302
    assert not TOTPDevice.objects.filter(user=ops).exists()
    (removed,) = AuditEvent.objects.filter(action=AuditEvent.Action.TOTP_DEVICE_REMOVED)
    assert (removed.actor, removed.target) == ("ops", "user:ops")
    client.logout()
    assert signed_in(log_in(client, "/admin/login/"))  # no code asked any more

    client.force_login(ops)
    client.get(SETUP)
    again = TOTPDevice.objects.get(user=ops)
    client.post(SETUP, {"code": code_for(again)})
    assert client.post(remove, {"proof": code_for(again)}).status_code == 302
    assert not TOTPDevice.objects.filter(user=ops).exists()


def test_an_operator_removes_a_lost_app(with_app, ops):
    call_command("totp_remove", "ops")
    assert not TOTPDevice.objects.filter(user=ops).exists()
    removed = AuditEvent.objects.get(action=AuditEvent.Action.TOTP_DEVICE_REMOVED)
    assert (removed.actor, removed.target) == ("system", "user:ops")
    with pytest.raises(CommandError):
        call_command("totp_remove", "ops")
    with pytest.raises(CommandError):
        call_command("totp_remove", "nobody")


def test_the_admin_has_no_page_to_plant_a_device(admin_client):
    assert admin_client.get("/admin/otp_totp/totpdevice/").status_code == 404


# --- LOGIN_REQUIRE_TOTP --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/admin/", "/admin/registry/mcpserver/", "/oauth/agents/", "/api/audit-events/"]
)
def test_required_staff_password_sessions_reach_only_the_set_up_page(client, ops, settings, path):
    settings.LOGIN_REQUIRE_TOTP = True
    ops.is_superuser = True  # every page open to it, once it has an app
    ops.save()
    assert signed_in(log_in(client, "/admin/login/"))
    led = client.get(path)
    assert led.status_code == 302
    assert led["Location"].startswith(f"{SETUP}?next=")
    page = client.get(led["Location"])
    assert page.status_code == 200 and 'id="second-factor-required"' in page.content.decode()

    pending = TOTPDevice.objects.get(user=ops)
    back = client.post(led["Location"], {"code": code_for(pending)})
    assert back.status_code == 302 and back["Location"] == path
    assert client.get(path).status_code == 200


def test_required_staff_may_still_log_out(client, ops, settings):
    settings.LOGIN_REQUIRE_TOTP = True
    client.force_login(ops)
    assert client.post("/admin/logout/").status_code == 200
    assert "_auth_user_id" not in client.session


def test_required_applies_to_staff_only(client, settings):
    settings.LOGIN_REQUIRE_TOTP = True
    planner = get_user_model().objects.create_user("planner", password=PASSWORD)
    client.force_login(planner)
    assert client.get("/oauth/agents/").status_code == 200


def test_single_sign_on_sessions_are_never_asked(client, ops, settings):
    """The company's identity provider does their second factor."""
    settings.LOGIN_REQUIRE_TOTP = True
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "signin.sso.SsoBackend"]
    client.force_login(ops, backend="signin.sso.SsoBackend")
    assert client.get("/admin/").status_code == 200
    assert not TOTPDevice.objects.exists()


def test_not_required_by_default_outside_production(client, ops):
    client.force_login(ops)
    assert client.get("/admin/").status_code == 200
