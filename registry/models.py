"""Registered MCP servers and the tools each may be asked to run."""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from registry import declarations

tool_name_validator = RegexValidator(
    declarations.TOOL_NAME_RE, _("도구 이름은 A-Z a-z 0-9 _ - . 로 된 1~128자여야 합니다.")
)


class McpServer(models.Model):
    class Provider(models.TextChoices):
        KB_VPD = declarations.KB_PROVIDER, _("KB VPD Streamable HTTP")
        VECTOR = declarations.VECTOR_PROVIDER, _("KB 벡터 검색")
        CUSTOM_PYTHON = declarations.CUSTOM_PYTHON_PROVIDER, _("로컬 Python MCP (custom_python)")

    class RouterMode(models.TextChoices):
        DIRECT = "direct", _("직접 선택 (라우터 없음)")
        LLM = "llm", _("LLM 라우터")

    class AuthDelivery(models.TextChoices):
        PER_REQUEST_VPD_BEARER = "per_request_vpd_bearer", _("요청마다 사용자 VPD Bearer")
        SERVICE_TOKEN_ENV = "service_token_env", _("환경변수의 서비스 토큰")
        NONE = "none", _("인증 없음")

    server_id = models.CharField(
        _("서버 ID"),
        max_length=64,
        unique=True,
        validators=[RegexValidator(declarations.SERVER_ID_RE)],
    )
    enabled = models.BooleanField(_("사용"), default=True)
    provider = models.CharField(_("제공자"), max_length=32, choices=Provider.choices)
    transport = models.CharField(_("전송 방식"), max_length=32, default="streamable_http")
    base_url_env = models.CharField(_("기본 URL 환경변수"), max_length=128, blank=True)
    endpoint_path = models.CharField(_("엔드포인트 경로"), max_length=256, blank=True)
    endpoint_url = models.CharField(_("엔드포인트 URL (기존 선언)"), max_length=512, blank=True)
    token_env = models.CharField(_("토큰 환경변수 이름 (기존 선언)"), max_length=128, blank=True)
    auth_delivery = models.CharField(
        _("인증 전달"),
        max_length=32,
        choices=AuthDelivery.choices,
        default=AuthDelivery.NONE,
        help_text=_(
            "사용자의 VPD Bearer는 KB VPD 서버(KB_MCP_BASE_URL)에만 전달됩니다. 다른 서버는 "
            "인증 없음 또는 자체 서비스 토큰(환경변수)만 받습니다."
        ),
    )
    timeout_seconds_env = models.CharField(_("타임아웃 환경변수"), max_length=128, blank=True)
    timeout_seconds = models.PositiveIntegerField(_("타임아웃(초)"), null=True, blank=True)
    default_tool = models.CharField(
        _("기본 도구"), max_length=128, validators=[tool_name_validator]
    )
    router_mode = models.CharField(
        _("라우팅"), max_length=16, choices=RouterMode.choices, default=RouterMode.DIRECT
    )
    description = models.TextField(_("설명"), blank=True, max_length=1000)
    created_at = models.DateTimeField(_("생성 시각"), auto_now_add=True)
    updated_at = models.DateTimeField(_("수정 시각"), auto_now=True)

    class Meta:
        ordering = ["server_id"]
        verbose_name = _("MCP 서버")
        verbose_name_plural = pgettext_lazy("plural", "MCP 서버")

    def __str__(self) -> str:
        return self.server_id

    def to_declaration(self) -> declarations.McpServerDeclaration:
        tools = tuple(self.allowed_tools.values_list("tool_name", flat=True))
        return declarations.McpServerDeclaration(
            id=self.server_id,
            enabled=self.enabled,
            provider=self.provider,
            transport=self.transport,
            base_url_env=self.base_url_env,
            endpoint_path=self.endpoint_path,
            endpoint_url=self.endpoint_url,
            token_env=self.token_env,
            auth_delivery=self.auth_delivery,
            timeout_seconds_env=self.timeout_seconds_env,
            timeout_seconds=self.timeout_seconds,
            default_tool=self.default_tool,
            tool_allowlist=tools,
            router_mode=self.router_mode,
            description=self.description,
        )


class AllowedTool(models.Model):
    server = models.ForeignKey(
        McpServer, on_delete=models.CASCADE, related_name="allowed_tools", verbose_name=_("서버")
    )
    tool_name = models.CharField(_("도구 이름"), max_length=128, validators=[tool_name_validator])

    class Meta:
        ordering = ["server", "tool_name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "tool_name"], name="unique_tool_per_server")
        ]
        verbose_name = _("허용 도구")
        verbose_name_plural = _("허용 도구 목록")

    def __str__(self) -> str:
        return self.tool_name


ACTIVE, EXPIRED, REVOKED, WRONG_AUDIENCE = "active", "expired", "revoked", "wrong_audience"
DELEGATION_STATES = (ACTIVE, EXPIRED, REVOKED, WRONG_AUDIENCE)


def delegation_state(revoked_at, expires_at, audience: str, now) -> str:
    """Whether a delegation's token is usable now, and if not, why: the one rule, asked by /mcp on
    every request, the model, its queryset and the admin (registry.delegations re-exports it).

    A token is for the resource it was issued for: once this deployment names its resource
    (MCP_RESOURCE_URL), a delegation issued for another one is refused. Delegations issued before
    any resource was named carry none and stay valid."""
    if revoked_at is not None:
        return REVOKED
    if expires_at <= now:
        return EXPIRED
    resource = settings.MCP_RESOURCE_URL
    if audience and resource and audience != resource:
        return WRONG_AUDIENCE
    return ACTIVE


class DelegationQuerySet(models.QuerySet):
    def in_state(self, state: str, *, now):
        """The delegations delegation_state() puts in `state` at `now`, as one filter."""
        live = models.Q(revoked_at__isnull=True, expires_at__gt=now)
        resource = settings.MCP_RESOURCE_URL
        for_here = models.Q(audience="") | models.Q(audience=resource) if resource else models.Q()
        if state == ACTIVE:
            return self.filter(live & for_here)
        if state == EXPIRED:
            return self.filter(revoked_at__isnull=True, expires_at__lte=now)
        if state == REVOKED:
            return self.filter(revoked_at__isnull=False)
        if state == WRONG_AUDIENCE:
            return self.filter(live & ~for_here) if resource else self.none()
        raise ValueError(f"unknown delegation state {state!r}")

    def usable(self, *, now):
        return self.in_state(ACTIVE, now=now)


class TokenDelegation(models.Model):
    """An "Aegis" delegation: this VPD token acts for this stakeholder, for this agent, until then.

    Only a keyed HMAC-SHA256 fingerprint of the token and a short display prefix are kept.
    """

    class Source(models.TextChoices):
        ISSUED = "issued", _("hyperbook에서 발급")
        REGISTERED = "registered", _("외부 발급 토큰 등록")
        SIGNED_IN = "signed_in", _("에이전트 로그인 (OAuth)")
        ENTERPRISE = "enterprise", _("엔터프라이즈 IdP 승인 (SEP-990)")

    fingerprint = models.CharField(_("토큰 지문 (HMAC-SHA256)"), max_length=64, unique=True)
    display_prefix = models.CharField(_("표시용 접두어"), max_length=16, blank=True)
    source = models.CharField(_("출처"), max_length=16, choices=Source.choices)
    stakeholder = models.ForeignKey(
        "kb.Stakeholder",
        on_delete=models.PROTECT,
        related_name="delegations",
        verbose_name=_("관계자"),
    )
    agent_name = models.CharField(_("위임 대상 에이전트/클라이언트"), max_length=128)
    tools = models.JSONField(_("허용 도구"), default=list)
    audience = models.CharField(
        _("대상 리소스 (audience)"),
        max_length=512,
        blank=True,
        help_text=_(
            "이 토큰이 쓰일 MCP 리소스(MCP_RESOURCE_URL). 다른 리소스에서는 거부됩니다. "
            "비어 있으면 MCP_RESOURCE_URL 없이 발급된 것입니다."
        ),
    )
    expires_at = models.DateTimeField(_("만료 시각"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("생성자"),
    )
    created_at = models.DateTimeField(_("생성 시각"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("마지막 사용"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("폐기 시각"), null=True, blank=True)
    revoked_reason = models.CharField(_("폐기 사유"), max_length=500, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("폐기자"),
    )
    # A sign-in's delegation (source "signed_in"): the OAuth client it was granted to, and the
    # family of refresh tokens that renews its access token. The current access token's
    # fingerprint is `fingerprint`; it is good until `token_expires_at`, the grant until
    # `expires_at`.
    oauth_client_id = models.CharField(_("OAuth 클라이언트 ID"), max_length=255, blank=True)
    oauth_token_family = models.UUIDField(_("갱신 토큰 계열"), null=True, blank=True, unique=True)
    token_expires_at = models.DateTimeField(_("접근 토큰 만료"), null=True, blank=True)
    # A renewal's predecessor: revoked when this delegation's token is first used (or at once).
    renews = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="renewals",
        verbose_name=_("갱신한 위임"),
    )

    objects = DelegationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["stakeholder", "revoked_at", "expires_at"])]
        permissions = [("explain_access", _("관계자의 접근 범위 설명을 볼 수 있음"))]
        verbose_name = _("토큰 위임")
        verbose_name_plural = _("토큰 위임 (Aegis)")

    def __str__(self) -> str:
        # The prefix and the stakeholder only: never anything a token could be rebuilt from.
        return f"{self.display_prefix}… → {self.stakeholder_id} ({self.agent_name})"

    def state(self, *, now) -> str:
        return delegation_state(self.revoked_at, self.expires_at, self.audience, now)


class ConsoleTurn(models.Model):
    """One discovery-console exchange, as its admin saw it. Never a token: a prefix and
    fingerprint identify which one was used."""

    class Kind(models.TextChoices):
        DISCOVER = "discover", _("탐색")
        CALL = "call", _("호출")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="console_turns",
        verbose_name=_("관리자"),
    )
    created_at = models.DateTimeField(_("시각"), auto_now_add=True)
    kind = models.CharField(_("종류"), max_length=16, choices=Kind.choices)
    server_id = models.CharField(_("서버"), max_length=64)
    tool = models.CharField(_("도구"), max_length=128, blank=True)
    stakeholder_id = models.CharField(_("관계자 ID"), max_length=16, blank=True)
    prompt = models.TextField(_("질문"), blank=True)
    status = models.CharField(_("결과"), max_length=32)
    http_status = models.PositiveSmallIntegerField(_("HTTP 상태"), null=True, blank=True)
    message = models.CharField(_("메시지"), max_length=300, blank=True)
    row_count = models.IntegerField(_("행 수"), null=True, blank=True)
    rendered = models.JSONField(_("표시된 결과"), default=dict, blank=True)
    token_prefix = models.CharField(_("토큰 접두어"), max_length=16, blank=True)
    token_fingerprint = models.CharField(_("토큰 지문"), max_length=64, blank=True)
    request_id = models.CharField(_("요청 ID"), max_length=64, blank=True)
    # The X-Request-ID every request of the exchange carried; its audit events share it.
    exchange_id = models.CharField(_("교환 ID"), max_length=64, blank=True)
    # The JSON-RPC messages as sent and received (no header, so never the bearer), each capped.
    transcript = models.JSONField(_("원본 JSON-RPC"), default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "-created_at"])]
        # Using the console sends a user's VPD bearer (a preset's or a typed one): a right of its
        # own, not implied by being able to view the registry.
        permissions = [("use_console", _("탐색 콘솔로 MCP 서버를 탐색하고 호출할 수 있음"))]
        verbose_name = _("탐색 콘솔 기록")
        verbose_name_plural = _("MCP 탐색 콘솔")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.server_id} {self.stakeholder_id} {self.status}"


class ToolPin(models.Model):
    """The definition of a server's tool as first seen (or last approved), by hash.

    A later discovery that sees another definition keeps it as pending and calls to the tool are
    held until an admin approves it: a server cannot silently change what a tool says or takes.
    A tool that was never approved (a new name on a pinned server) has only a pending definition.
    """

    server = models.ForeignKey(
        McpServer, on_delete=models.CASCADE, related_name="tool_pins", verbose_name=_("서버")
    )
    tool_name = models.CharField(_("도구 이름"), max_length=128)
    definition_hash = models.CharField(_("정의 해시 (SHA-256)"), max_length=64, blank=True)
    definition = models.JSONField(_("고정된 정의"), null=True, blank=True)
    pinned_at = models.DateTimeField(_("고정 시각"), null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("승인자"),
        help_text=_("비어 있으면 처음 발견할 때 자동으로 고정된 정의입니다."),
    )
    pending_hash = models.CharField(_("변경된 정의 해시"), max_length=64, blank=True)
    pending_definition = models.JSONField(_("변경된 정의"), null=True, blank=True)
    changed_at = models.DateTimeField(_("변경 발견 시각"), null=True, blank=True)

    class Meta:
        ordering = ["server", "tool_name"]
        constraints = [
            models.UniqueConstraint(fields=["server", "tool_name"], name="unique_pin_per_tool")
        ]
        permissions = [("approve_toolpin", _("변경된 도구 정의를 승인할 수 있음"))]
        verbose_name = _("도구 정의 고정")
        verbose_name_plural = pgettext_lazy("plural", "도구 정의 고정")

    def __str__(self) -> str:
        return f"{self.server_id}:{self.tool_name}"

    @property
    def is_held(self) -> bool:
        return bool(self.pending_hash)

    @property
    def is_quarantined(self) -> bool:
        """Never approved: a tool first seen on a server whose tools were already pinned."""
        return not self.definition_hash


class ServerCheck(models.Model):
    """A server's last discovery as a service check: when, whether it answered, how fast, how
    many tools it lists, and what went wrong, in words. Sent no user's bearer."""

    server = models.OneToOneField(
        McpServer, on_delete=models.CASCADE, related_name="last_check", verbose_name=_("서버")
    )
    checked_at = models.DateTimeField(_("확인 시각"))
    ok = models.BooleanField(_("정상"))
    latency_ms = models.PositiveIntegerField(_("지연(ms)"), null=True, blank=True)
    tool_count = models.PositiveIntegerField(_("도구 수"), null=True, blank=True)
    result = models.CharField(_("결과"), max_length=300)
    checked_by = models.CharField(_("확인한 사람"), max_length=150, blank=True)

    class Meta:
        verbose_name = _("서버 상태 확인")
        verbose_name_plural = _("서버 상태 확인")

    def __str__(self) -> str:
        return f"{self.server_id}: {self.result}"
