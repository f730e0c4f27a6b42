from datetime import timedelta

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext_lazy as _

from kb.models import Stakeholder
from registry.declarations import KB_TOOL_NAME
from registry.selectors import delegable_tools

# What <input type="datetime-local"> sends and expects: local wall-clock time, to the minute.
LOCAL_MINUTE = "%Y-%m-%dT%H:%M"


def _default_expiry():
    return timezone.now() + timedelta(days=settings.DELEGATION_DEFAULT_LIFETIME_DAYS)


def _latest_expiry():
    return timezone.now() + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS)


class ExpiryField(forms.DateTimeField):
    """A local date-time picker, its bounds (now .. DELEGATION_MAX_LIFETIME_DAYS) shown and kept."""

    def __init__(self, **kwargs):
        super().__init__(
            label=_("만료 시각"),
            initial=_default_expiry,
            widget=forms.DateTimeInput(format=LOCAL_MINUTE, attrs={"type": "datetime-local"}),
            **kwargs,
        )

    def bind_bounds(self) -> None:
        now, latest = timezone.localtime(), timezone.localtime(_latest_expiry())
        self.widget.attrs.update(min=now.strftime(LOCAL_MINUTE), max=latest.strftime(LOCAL_MINUTE))
        self.help_text = _("%(zone)s 기준. 최대 %(latest)s (%(days)s일 뒤)까지.") % {
            "zone": timezone.get_current_timezone_name(),
            "latest": date_format(latest, "SHORT_DATETIME_FORMAT"),
            "days": settings.DELEGATION_MAX_LIFETIME_DAYS,
        }

    def clean(self, value):
        expires_at = super().clean(value)
        if expires_at <= timezone.now():
            raise forms.ValidationError(_("만료 시각은 현재 이후여야 합니다."))
        if expires_at > _latest_expiry():
            raise forms.ValidationError(
                _("만료 시각은 최대 %(days)s일 이내여야 합니다.")
                % {"days": settings.DELEGATION_MAX_LIFETIME_DAYS}
            )
        return expires_at


class DelegationTermsForm(forms.Form):
    stakeholder = forms.ModelChoiceField(Stakeholder.objects.all(), label=_("관계자"))
    agent_name = forms.CharField(label=_("위임 대상 에이전트/클라이언트"), max_length=128)
    tools = forms.MultipleChoiceField(
        label=_("허용 도구"),
        widget=forms.CheckboxSelectMultiple,
        error_messages={
            "required": _("허용할 도구를 하나 이상 고르세요."),
            "invalid_choice": _(
                "%(value)s 도구는 사용 중인 어느 MCP 서버의 허용 도구 목록에도 없습니다."
            ),
        },
    )
    expires_at = ExpiryField()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        tools = delegable_tools()
        self.fields["tools"].choices = [
            (name, f"{name} ({', '.join(servers)})") for name, servers in tools.items()
        ]
        self.fields["tools"].initial = [KB_TOOL_NAME] if KB_TOOL_NAME in tools else []
        self.fields["tools"].help_text = (
            _("사용 중인 MCP 서버의 허용 도구 목록에서 고릅니다 (괄호 안은 그 도구를 허용한 서버).")
            if tools
            else _("사용 중인 MCP 서버에 허용 도구가 없습니다: 먼저 서버를 등록하세요.")
        )
        self.fields["expires_at"].bind_bounds()


class DelegationRegisterForm(DelegationTermsForm):
    # A password field: the browser neither shows nor autocompletes it, and it is never re-rendered.
    token = forms.CharField(
        label=_("외부 발급 VPD 토큰"),
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        max_length=600,
        strip=True,
    )


class DelegationRevokeForm(forms.Form):
    reason = forms.CharField(label=_("폐기 사유"), max_length=500)


class DelegationRenewForm(forms.Form):
    expires_at = ExpiryField()
    revoke_now = forms.BooleanField(
        label=_("지금 바로 이전 위임 폐기"),
        required=False,
        help_text=_(
            "선택하지 않으면 이전 위임은 새 토큰이 처음 쓰일 때 폐기됩니다: 에이전트 설정을 "
            "바꾸는 동안에도 끊기지 않습니다."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expires_at"].bind_bounds()


class DelegationBulkRevokeForm(forms.Form):
    reason = forms.CharField(label=_("폐기 사유"), max_length=500)
