"""API tokens for machine clients of the REST API (e.g. a SIEM pulling audit events).

Like VPD tokens: shown once, stored as a keyed HMAC fingerprint with a short display prefix.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        verbose_name=_("사용자"),
    )
    label = models.CharField(_("용도"), max_length=128)
    display_prefix = models.CharField(_("표시용 접두어"), max_length=16)
    fingerprint = models.CharField(_("토큰 지문"), max_length=64, unique=True)
    created_at = models.DateTimeField(_("생성 시각"), auto_now_add=True)
    expires_at = models.DateTimeField(_("만료 시각"))
    revoked_at = models.DateTimeField(_("폐기 시각"), null=True, blank=True)

    class Meta:
        verbose_name = _("API 토큰")
        verbose_name_plural = pgettext_lazy("plural", "API 토큰")

    def __str__(self) -> str:
        return f"{self.display_prefix}… ({self.label})"
