"""People's password logins as rules: what a failed one counts against (django-axes keeps the
counts), what the audit records of each failure and lockout, and how long a lock has left."""

from datetime import datetime, timedelta
from enum import StrEnum

from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import (
    get_client_username,
    get_cool_off,
    get_failure_limit,
    get_lockout_parameters,
)
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.db.models import Sum
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import audit_record, client_text, refusal_budget_admit
from core.tokens import keyed_fingerprint

# What a name that matches no account is counted as: this prefix and a keyed fingerprint. Django's
# usernames cannot hold ":", so it never stands for an account.
UNKNOWN_ACCOUNT = "unknown:"

# The lockout parameters, as the audit names them.
_LOCKED_NAMES = {"username": "account", "ip_address": "address"}


class LoginFailure(StrEnum):
    """Why a login failed, as its audit event's detail says."""

    PASSWORD = "password"  # noqa: S105  (no account with that name and password)
    CODE = "code"  # the password was right; the authenticator app's code was missing or wrong
    LOCKED_OUT = "locked_out"  # refused unread: the account or the address is locked


# --- what django-axes counts (its settings name these) -------------------------------------------


def client_address(request) -> str | None:
    """The address a login comes from (AXES_CLIENT_IP_CALLABLE): the socket's peer. The web
    server puts a forwarded address there only for the proxies in FORWARDED_ALLOW_IPS; an
    X-Forwarded-For header a client sends itself is never read."""
    return request.META.get("REMOTE_ADDR") or None


def _typed_name(request, credentials: dict | None) -> str:
    # Where axes itself looks: the credentials authenticate() was given, else the posted form.
    if credentials:
        return credentials.get("username") or ""
    return getattr(request, "POST", {}).get("username") or ""


def account_key(request, credentials: dict | None = None) -> str | None:
    """The name a failed login counts against (AXES_USERNAME_CALLABLE): the typed name when it is
    an account's; otherwise a keyed fingerprint of it, so that a password typed into the name
    field is never stored, and an unknown name is locked like a known one (a lockout tells nobody
    which names exist)."""
    typed = _typed_name(request, credentials)
    if not typed:
        return None
    User = get_user_model()
    if (
        "\x00" not in typed
        and User._default_manager.filter(**{User.USERNAME_FIELD: typed}).exists()
    ):
        return typed
    return UNKNOWN_ACCOUNT + keyed_fingerprint(typed, context="login-name:")[:32]


def lockout_parameters(request, credentials: dict | None = None) -> list[str]:
    """What a failure counts against (AXES_LOCKOUT_PARAMETERS): the account and, on its own, the
    address. A sign-in that names no account (single sign-on's callback) counts against its
    address only: axes would otherwise count all of those, from every address, as one account's."""
    if _typed_name(request, credentials):
        return ["username", "ip_address"]
    return ["ip_address"]


class AuditedDatabaseHandler(AxesDatabaseHandler):
    """django-axes' database handler (AXES_HANDLER), which also audits each failure it counts or
    refuses and each lock it begins, and clears less on a successful login.

    The counts live in the database because every worker and host shares it: Django's cache here
    is each process's own memory, where every worker would count on its own (and so multiply the
    limit). A test's transaction undoes them, too."""

    def user_login_failed(self, sender, credentials: dict, request=None, **kwargs):
        # The backend marks a login it refused because a lock holds (see
        # AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT): such a login is not counted again.
        refused = bool(getattr(request, "axes_locked_out", False))
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None:
            return  # axes has said why (it counts nothing without a request either)
        account = get_client_username(request, credentials)
        attempt = {
            "page": client_text(request.path),
            "address": client_text(request.axes_ip_address or "", 64),
            "user_agent": client_text(request.axes_user_agent, 256),
            "account": account,
        }
        if _typed_name(request, credentials):  # a single sign-on refusal is audited as one
            cause = (
                LoginFailure.LOCKED_OUT if refused else kwargs.get("cause", LoginFailure.PASSWORD)
            )
            login_failure_record(**attempt, cause=cause, answered_locked=request.axes_locked_out)
        if not refused:
            locked = self.locks_begun(request, credentials)
            if locked:
                login_lockout_record(**attempt, locked=locked)

    def locks_begun(self, request, credentials: dict) -> list[str]:
        """The lockout parameters this failure brought to the limit. A failure is counted only
        while none of its parameters is locked, so those at the limit now have just reached it."""
        if not request.axes_locked_out:
            return []
        limit = get_failure_limit(request, credentials)
        parameters = get_lockout_parameters(request, credentials)
        attempts = self.get_user_attempts(request, credentials)  # one queryset per parameter
        return [
            parameter
            for parameter, counted in zip(parameters, attempts, strict=True)
            if (counted.aggregate(n=Sum("failures_since_start"))["n"] or 0) >= limit
        ]

    def lock_ends_at(self, request, credentials: dict | None) -> datetime | None:
        """When the locks this login met lift: each once its most recent failures that reach the
        limit are older than the cool-off."""
        limit = get_failure_limit(request, credentials)
        cool_off = get_cool_off(request)
        ends = []
        for attempts in self.get_user_attempts(request, credentials):
            counted = 0
            for attempt_time, failures in attempts.order_by("-attempt_time").values_list(
                "attempt_time", "failures_since_start"
            ):
                counted += failures
                if counted >= limit:
                    ends.append(attempt_time + cool_off)
                    break
        return max(ends, default=None)

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        """A successful login clears the failures it answers for: its account's, from its address.
        Not axes' own reset (every failure of the account, and every failure from the address): a
        guesser with an account of their own could then clear their address's count, and their
        guesses at someone else's account, by signing in between guesses."""
        count, _ = AccessAttempt.objects.filter(
            username=get_client_username(request, credentials),
            ip_address=request.axes_ip_address,
        ).delete()
        return count


def login_code_refused(request, *, username: str) -> None:
    """A password that was right with an authenticator code that was not: a failed login like any
    other, counted by django-axes and audited (through the signal authenticate() sends)."""
    user_login_failed.send(
        sender=__name__,
        credentials={"username": username},
        request=request,
        cause=LoginFailure.CODE,
    )


def lock_seconds_left(request) -> int:
    """How long until the locks a locked-out login met lift (for Retry-After), at least a second
    and at most the cool-off."""
    cool_off = get_cool_off(request)
    credentials = getattr(request, "axes_credentials", None)
    ends_at = AxesProxyHandler.get_implementation().lock_ends_at(request, credentials)
    left = (ends_at - timezone.now()) if ends_at is not None else cool_off
    return int(min(max(left, timedelta(seconds=1)), cool_off).total_seconds())


# --- the audit ------------------------------------------------------------------------------------


def _named(account: str | None) -> str:
    """The account as the audit may name it: a name that matches none is only "unknown" there."""
    if not account or account.startswith(UNKNOWN_ACCOUNT):
        return "unknown"
    return account


def login_failure_record(
    *,
    page: str,
    address: str,
    user_agent: str,
    account: str | None,
    cause: LoginFailure,
    answered_locked: bool,
) -> None:
    """An audit event for a failed login: the page, the address, the account (or "unknown"), why;
    never the password. Anyone can cause one, so each address has a budget per window."""
    detail = str(cause)
    admission = refusal_budget_admit(kind="login-failures", address=address)
    if not admission.record:
        return
    if admission.first_past:
        detail = f"{cause}: budget reached, rest of window not recorded"
    named = _named(account)
    audit_record(
        action=AuditEvent.Action.AUTH_LOGIN_FAILED,
        outcome=(
            AuditEvent.Outcome.RATE_LIMITED
            if cause == LoginFailure.LOCKED_OUT
            else AuditEvent.Outcome.UNAUTHENTICATED
        ),
        http_status=429 if answered_locked else 200,  # the lockout page, or the form again
        client_address=address,
        user_agent=user_agent,
        target=f"user:{named}" if named != "unknown" else "",
        changes={"page": page, "account": named},
        detail=detail,
    )


def login_lockout_record(
    *, page: str, address: str, user_agent: str, account: str | None, locked: list[str]
) -> None:
    """An audit event for a lock that has just begun: of the account, the address, or both. Never
    budgeted: a lock begins only with a counted failure, and an address has at most
    LOGIN_FAILURE_LIMIT of those per cool-off."""
    named = _named(account)
    what = sorted(_LOCKED_NAMES[parameter] for parameter in locked)
    audit_record(
        action=AuditEvent.Action.AUTH_LOCKED_OUT,
        outcome=AuditEvent.Outcome.RATE_LIMITED,
        http_status=429,
        client_address=address,
        user_agent=user_agent,
        target=f"user:{named}" if "account" in what and named != "unknown" else "",
        changes={
            "page": page,
            "account": named,
            "locked": what,
            "failure_limit": settings.LOGIN_FAILURE_LIMIT,
            "cooloff_minutes": settings.LOGIN_COOLOFF_MINUTES,
        },
        detail=f"{' and '.join(what)} locked for {settings.LOGIN_COOLOFF_MINUTES} minutes",
    )
