from datetime import timedelta

from django import forms
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from kb.models import Stakeholder
from registry.declarations import KB_TOOL_NAME


def _default_expiry():
    return timezone.now() + timedelta(days=settings.DELEGATION_DEFAULT_LIFETIME_DAYS)


class DelegationTermsForm(forms.Form):
    stakeholder = forms.ModelChoiceField(Stakeholder.objects.all(), label=_("관계자"))
    agent_name = forms.CharField(label=_("위임 대상 에이전트/클라이언트"), max_length=128)
    tools = forms.CharField(
        label=_("허용 도구"),
        initial=KB_TOOL_NAME,
        help_text=_("쉼표로 구분한 MCP 도구 이름"),
        max_length=1000,
    )
    expires_at = forms.DateTimeField(label=_("만료 시각"), initial=_default_expiry)

    def clean_tools(self) -> list[str]:
        return [name.strip() for name in self.cleaned_data["tools"].split(",") if name.strip()]


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
