"""Who may sign an agent in, and which approval an authorization code carries."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class StakeholderLogin(models.Model):
    """This login acts as this stakeholder when it signs an agent in. One each way: a person is
    one stakeholder, and a stakeholder is one person's. A login without one can grant nothing."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="stakeholder_login",
        verbose_name=_("사용자"),
    )
    stakeholder = models.OneToOneField(
        "kb.Stakeholder",
        on_delete=models.CASCADE,
        related_name="login",
        verbose_name=_("관계자"),
    )
    created_at = models.DateTimeField(_("연결 시각"), auto_now_add=True)

    class Meta:
        verbose_name = _("로그인-관계자 연결")
        verbose_name_plural = _("로그인-관계자 연결")

    def __str__(self) -> str:
        return f"{self.user} → {self.stakeholder_id}"


class CodeApproval(models.Model):
    """The delegation a consent created, carried by its authorization code until the code is
    exchanged (the code's row, and this with it, is then deleted)."""

    grant = models.OneToOneField(
        "oauth2_provider.Grant", on_delete=models.CASCADE, related_name="approval"
    )
    delegation = models.ForeignKey(
        "registry.TokenDelegation", on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        verbose_name = _("인가 코드 승인")
        verbose_name_plural = _("인가 코드 승인")

    def __str__(self) -> str:
        return f"grant {self.grant_id} → delegation {self.delegation_id}"
