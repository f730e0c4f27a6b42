"""A second factor for staff who log in with a local password: an authenticator app (TOTP, by
django-otp) that the login form asks for once it is added. With LOGIN_REQUIRE_TOTP, staff add one
before they may do anything else. Single sign-on sessions are never asked."""

from base64 import b32encode

import django_otp
import segno
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from audit.models import AuditEvent
from audit.services import audit_record, request_origin

# Sessions signed in through the company's identity provider: the provider does the second factor
# (with its own policy and devices), so hyperbook never asks them for a code.
SSO_BACKEND = "signin.sso.SsoBackend"


def totp_may_add(user) -> bool:
    """Who may add an authenticator app: staff (the others sign agents in, and have no admin)."""
    return bool(user.is_authenticated and user.is_staff)


def totp_device_of(user) -> TOTPDevice | None:
    """The user's authenticator app, once confirmed: the login asks for its code."""
    return TOTPDevice.objects.devices_for_user(user, confirmed=True).order_by("pk").first()


def totp_device_pending(user) -> TOTPDevice:
    """The app being added, not yet confirmed. Its secret stays until it is confirmed, so that
    the page shows, reloaded, the QR code already scanned."""
    pending = TOTPDevice.objects.devices_for_user(user, confirmed=False).order_by("pk").first()
    return pending or TOTPDevice.objects.create(user=user, name="hyperbook", confirmed=False)


def totp_code_verified(*, user, device: TOTPDevice, code: str) -> TOTPDevice | None:
    """The device, when `code` is its current code (spaces ignored); else None. django-otp's
    check: each failure makes the device wait longer before it checks again, and a code that was
    accepted once is never accepted again."""
    return django_otp.verify_token(user, device.persistent_id, "".join((code or "").split()))


def totp_setup_qr_svg(device: TOTPDevice) -> str:
    """The device's otpauth:// URI as a QR code, inline SVG: no image file, nothing the page's
    Content-Security-Policy would refuse."""
    return segno.make(device.config_url, error="m").svg_inline(scale=4, border=2)


def totp_secret_text(device: TOTPDevice) -> str:
    """The secret as authenticator apps take it typed in: base32, in groups of four."""
    secret = b32encode(device.bin_key).decode().rstrip("=")
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


def totp_device_confirm(*, request, device: TOTPDevice) -> None:
    """The app the signed-in user has just shown a code of: confirmed (any other of theirs goes),
    this session counted as verified by it, and audited."""
    user = request.user
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
        device.confirmed = True
        device.save(update_fields=["confirmed"])
        _device_change_record(
            AuditEvent.Action.TOTP_DEVICE_ADDED, user=user, actor=user, request=request
        )
    django_otp.login(request, device)


def totp_device_remove(*, user, actor, request=None) -> bool:
    """Remove the user's authenticator app (by themselves on its page, or by an operator for a
    lost phone); their local login asks for no code from then on. Audited; False if there was
    none."""
    with transaction.atomic():
        had_one = TOTPDevice.objects.devices_for_user(user, confirmed=True).exists()
        TOTPDevice.objects.filter(user=user).delete()
        if had_one:
            _device_change_record(
                AuditEvent.Action.TOTP_DEVICE_REMOVED, user=user, actor=actor, request=request
            )
    if request is not None:
        request.session.pop(django_otp.DEVICE_ID_SESSION_KEY, None)
    return had_one


def _device_change_record(action: AuditEvent.Action, *, user, actor, request) -> None:
    present = {"authenticator_app": "totp"}
    added = action == AuditEvent.Action.TOTP_DEVICE_ADDED
    audit_record(
        action=action,
        outcome=AuditEvent.Outcome.CHANGED,
        actor=actor.get_username() if actor is not None else "system",
        target=f"user:{user.get_username()}",
        changes={"before": None if added else present, "after": present if added else None},
        **request_origin(request.META if request is not None else {}),
    )


def second_factor_set_up_due(request) -> bool:
    """With LOGIN_REQUIRE_TOTP: a staff session not of single sign-on, whose account has no
    authenticator app yet."""
    if not settings.LOGIN_REQUIRE_TOTP:
        return False
    user = request.user
    if not totp_may_add(user):
        return False
    if request.session.get(BACKEND_SESSION_KEY) == SSO_BACKEND:
        return False
    return totp_device_of(user) is None


def second_factor_set_up_first(get_response):
    """Middleware: while a session's set-up is due, every page but the set-up page (and logging
    out, or in as someone else) leads there, and back afterwards."""

    def middleware(request):
        if second_factor_set_up_due(request) and request.path not in _open_while_due():
            return redirect_to_login(
                request.get_full_path(), login_url=reverse("signin:second-factor")
            )
        return get_response(request)

    return middleware


def _open_while_due() -> set[str]:
    return {
        reverse(name)
        for name in ("signin:second-factor", "signin:login", "admin:login", "admin:logout")
    }
