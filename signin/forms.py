from datetime import datetime, time, timedelta

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import authenticate
from django.contrib.auth.forms import AuthenticationForm
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.forms import AllowForm
from oauth2_provider.settings import oauth2_settings

from signin.logins import login_code_refused
from signin.second_factor import totp_code_verified, totp_device_of


def grantable_tools() -> list[str]:
    """The tools a sign-in may grant: the scopes this server defines (one per /mcp tool)."""
    return list(oauth2_settings.SCOPES)


class ConsentForm(AllowForm):
    """The toolkit's hidden authorization fields, plus what the user decides: which tools, and
    until when (a date in the server's time zone, at most DELEGATION_MAX_LIFETIME_DAYS away)."""

    tools = forms.MultipleChoiceField(
        label=_("허용할 도구"), required=False, widget=forms.CheckboxSelectMultiple
    )
    # Written and read in the page's language (Django's formats), not with the browser's date
    # picker, which shows its own locale's order (a US browser's month/day/year on a Korean page).
    expires_on = forms.DateField(
        label=_("만료일"),
        required=False,
        localize=True,
        widget=forms.DateInput(attrs={"autocomplete": "off", "size": 12}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = [(name, name) for name in grantable_tools()]
        today = timezone.localdate()
        latest = today + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS)
        self.fields["expires_on"].widget.attrs["placeholder"] = formats.localize_input(
            latest, formats.get_format("DATE_INPUT_FORMATS")[0]
        )
        self.latest_day = latest

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("allow"):
            return cleaned
        if not cleaned.get("tools"):
            self.add_error("tools", _("도구를 하나 이상 선택하세요."))
        day = cleaned.get("expires_on")
        if day is None:
            self.add_error("expires_on", _("만료일을 입력하세요."))
        elif day <= timezone.localdate() or day > self.latest_day:
            self.add_error(
                "expires_on",
                _("만료일은 내일부터 %(latest)s 사이여야 합니다.")
                % {"latest": formats.date_format(self.latest_day)},
            )
        return cleaned

    def expires_at(self) -> datetime:
        """The end of the chosen day, but never past the longest lifetime from now."""
        end = timezone.make_aware(datetime.combine(self.cleaned_data["expires_on"], time.max))
        longest = timezone.now() + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS)
        return min(end, longest)


def _code_input() -> forms.TextInput:
    return forms.TextInput(
        attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "size": 10}
    )


class LoginForm(AuthenticationForm):
    """The login form of /oauth/login/ and (as AdminLoginForm) /admin/login/: a name and a
    password and, for an account that has added an authenticator app, its current code.

    A missing or wrong code fails the login as a wrong password does: counted by django-axes,
    audited, and answered with the same message, so that the answer never tells a guesser the
    password was right (django-otp's own form mixin asks for the code instead, which would)."""

    otp_token = forms.CharField(
        label=_("인증 코드"),
        required=False,
        max_length=16,
        help_text=_("인증 앱을 등록한 계정만 입력합니다."),
        widget=_code_input(),
    )
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": _(
            "%(username)s과 비밀번호를, 인증 앱을 등록했다면 인증 코드까지 정확히 입력하세요. "
            "대소문자를 구분합니다."
        ),
    }

    def clean(self):
        cleaned = super().clean()
        user = self.get_user()
        device = totp_device_of(user) if user is not None else None
        if device is not None:
            verified = totp_code_verified(user=user, device=device, code=cleaned.get("otp_token"))
            if verified is None:
                self.user_cache = None
                login_code_refused(self.request, username=user.get_username())
                raise self.get_invalid_login_error()
            user.otp_device = verified  # django-otp counts the session as verified at login
        return cleaned


class AdminLoginForm(LoginForm, AdminAuthenticationForm):
    """The same, for the admin (admin.site.login_form): staff accounts only."""

    error_messages = {
        **LoginForm.error_messages,
        "invalid_login": _(
            "관리자 계정의 %(username)s과 비밀번호를, 인증 앱을 등록했다면 인증 코드까지 정확히 "
            "입력하세요. 대소문자를 구분합니다."
        ),
    }


class TotpConfirmForm(forms.Form):
    """Adding an authenticator app: a code it shows proves it holds the secret."""

    code = forms.CharField(label=_("인증 코드"), max_length=16, widget=_code_input())

    def __init__(self, *args, user, device, **kwargs):
        super().__init__(*args, **kwargs)
        self.user, self.device = user, device

    def clean_code(self):
        code = self.cleaned_data["code"]
        if totp_code_verified(user=self.user, device=self.device, code=code) is None:
            raise forms.ValidationError(
                _("인증 앱에 지금 보이는 코드가 아닙니다. 휴대폰의 시각이 맞는지도 확인하세요.")
            )
        return code


class TotpRemoveForm(forms.Form):
    """Removing the authenticator app takes the password or the app's current code: a session
    left open is not enough. A wrong one is a failed login (counted and audited)."""

    proof = forms.CharField(
        label=_("비밀번호 또는 현재 인증 코드"),
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, *args, request, device, **kwargs):
        super().__init__(*args, **kwargs)
        self.request, self.device = request, device

    def clean_proof(self):
        proof = self.cleaned_data["proof"]
        user = self.request.user
        code = "".join(proof.split())
        if code.isdigit() and len(code) == self.device.digits:  # never a password (all digits)
            proved = totp_code_verified(user=user, device=self.device, code=code) is not None
            if not proved:
                login_code_refused(self.request, username=user.get_username())
        else:
            signed = authenticate(self.request, username=user.get_username(), password=proof)
            proved = signed is not None and signed.pk == user.pk
        if not proved:
            raise forms.ValidationError(_("비밀번호나 인증 코드가 맞지 않습니다."))
        return ""  # nothing of it is kept
