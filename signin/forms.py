from datetime import datetime, time, timedelta

from django import forms
from django.conf import settings
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.forms import AllowForm
from oauth2_provider.settings import oauth2_settings


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
