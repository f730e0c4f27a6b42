"""Who may sign an agent in, and which approval an authorization code carries."""

from django.conf import settings
from django.core.exceptions import ValidationError
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


class RedeemedCode(models.Model):
    """An authorization code once exchanged, by its fingerprint, and the delegation it produced.
    RFC 6749 §4.1.2: a code presented again is refused and what it produced is revoked; this row
    is how a replay finds it once the code's own row is gone. The fingerprint is unique, so of
    two exchanges of one code at once, the database lets one through."""

    code_fingerprint = models.CharField(max_length=64, unique=True)
    delegation = models.ForeignKey(
        "registry.TokenDelegation", on_delete=models.CASCADE, related_name="+"
    )
    redeemed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("교환된 인가 코드")
        verbose_name_plural = _("교환된 인가 코드")

    def __str__(self) -> str:
        return f"code → delegation {self.delegation_id}"


class EnterpriseIdp(models.Model):
    """An enterprise identity provider trusted to grant agents access (SEP-990): its ID-JAGs
    (Identity Assertion JWT Authorization Grants) are exchanged at the token endpoint for an access
    token acting as the stakeholder its subject is linked to. What it may grant is bounded here,
    not by what the assertion asks: these clients, these tools."""

    name = models.CharField(_("이름"), max_length=128)
    issuer = models.CharField(
        _("발급자 (iss)"),
        max_length=512,
        unique=True,
        help_text=_("ID-JAG의 iss 값과 글자 그대로 같아야 합니다."),
    )
    jwks_url = models.URLField(
        _("JWKS URL"), max_length=512, blank=True, help_text=_("서명 검증 공개키 위치 (https).")
    )
    jwks = models.JSONField(
        _("JWKS (직접 입력)"),
        default=dict,
        blank=True,
        help_text=_("JWKS URL 대신 공개키 집합(JWKS JSON)을 직접 둘 때."),
    )
    client_ids = models.JSONField(
        _("허용 클라이언트 ID"), default=list, help_text=_("이 IdP가 승인할 수 있는 클라이언트.")
    )
    tools = models.JSONField(
        _("허용 도구"), default=list, help_text=_("이 IdP가 승인할 수 있는 MCP 도구.")
    )
    subject_claim = models.CharField(
        _("사용자 클레임"),
        max_length=64,
        default="sub",
        help_text=_(
            "값이 hyperbook 로그인 사용자명인 클레임. 그 로그인의 관계자 연결로 조회합니다."
        ),
    )
    enabled = models.BooleanField(_("사용"), default=True)
    created_at = models.DateTimeField(_("등록 시각"), auto_now_add=True)

    class Meta:
        verbose_name = _("엔터프라이즈 IdP")
        verbose_name_plural = _("엔터프라이즈 IdP")

    def __str__(self) -> str:
        return f"{self.name} ({self.issuer})"

    def clean(self):
        # Caught here, in the admin, rather than as every agent's refusal at the token endpoint.
        if not self.jwks_url and not (self.jwks or {}).get("keys"):
            raise ValidationError(_("JWKS URL이나 JWKS 중 하나는 있어야 합니다."))
        if self.jwks_url and not self.jwks_url.startswith("https://"):
            raise ValidationError({"jwks_url": _("JWKS URL은 https여야 합니다.")})
        for field in ("client_ids", "tools"):
            value = getattr(self, field)
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValidationError({field: _("문자열 목록이어야 합니다.")})


class SeenAssertion(models.Model):
    """An ID-JAG once presented, by its issuer and jti, kept until it expires (RFC 7523 §3: the
    server may refuse a JWT it has seen before). A row, not the cache: a restart or an evicted
    key must not let a captured assertion be exchanged twice. Unique, so of two presentations at
    once the database lets one through."""

    issuer = models.CharField(max_length=512)
    jti = models.CharField(max_length=255)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "jti"], name="signin_seen_assertion_once")
        ]

    def __str__(self) -> str:
        return f"{self.issuer} jti {self.jti}"


class SsoIdentity(models.Model):
    """The company identity provider's name for a person (issuer and subject), and the login it
    signs in. A person is found by these two alone, never by e-mail or username: a provider may
    let its users change those, and a local account of the same name must not be taken over."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="sso_identity",
        verbose_name=_("사용자"),
    )
    issuer = models.CharField(_("발급자 (iss)"), max_length=255)
    subject = models.CharField(_("주체 (sub)"), max_length=255)
    created_at = models.DateTimeField(_("처음 로그인"), auto_now_add=True)
    last_sign_in_at = models.DateTimeField(_("마지막 로그인"), null=True, blank=True)

    class Meta:
        verbose_name = _("SSO 계정")
        verbose_name_plural = _("SSO 계정")
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="sso_identity_unique_subject"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} ← {self.subject}"
