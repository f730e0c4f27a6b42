"""Append-only audit events, hash-chained per source, and their delivery state (kept apart).

Events are never updated or deleted through the application, and database triggers refuse it.
The triggers stop mistakes, not the tables' owner: the application's role owns them and could drop
the triggers, so a rewrite by someone holding its credentials is caught by the signed checkpoints
anchored outside the database (audit.checkpoints). Delivery state lives in its own table.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from uuid_utils.compat import uuid7  # time-ordered ids: appends land at the end of the key index


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("audit events are append-only")

    def delete(self):
        raise TypeError("audit events are append-only")

    def bulk_update(self, *args, **kwargs):
        raise TypeError("audit events are append-only")


class AuditEvent(models.Model):
    class Action(models.TextChoices):
        """Every action an event records: what emits events names one, and the admin filters by
        them. Not a database constraint, so a new action needs no migration."""

        MCP_TOOLS_CALL = "mcp.tools_call", _("MCP 도구 호출")
        MCP_TOOLS_LIST = "mcp.tools_list", _("MCP 도구 목록")
        MCP_INITIALIZE = "mcp.initialize", _("MCP 초기화")
        MCP_PING = "mcp.ping", _("MCP ping")
        MCP_SERVER_DISCOVER = "mcp.server_discover", _("MCP 서버 탐색")
        MCP_NOTIFICATIONS_INITIALIZED = "mcp.notifications_initialized", _("MCP 초기화 완료 알림")
        MCP_NOTIFICATIONS_CANCELLED = "mcp.notifications_cancelled", _("MCP 취소 알림")
        MCP_NOTIFICATIONS_PROGRESS = "mcp.notifications_progress", _("MCP 진행 알림")
        MCP_NOTIFICATIONS_ROOTS_LIST_CHANGED = (
            "mcp.notifications_roots_list_changed",
            _("MCP 루트 목록 변경 알림"),
        )
        MCP_PREFLIGHT = "mcp.preflight", _("MCP CORS 사전 요청")
        MCP_REQUEST = "mcp.request", _("MCP 기타 요청")
        MCP_REFUSALS_SUMMARY = "mcp.refusals_summary", _("MCP 거부 요약")
        MCP_STREAM_OPEN = "mcp.stream_open", _("MCP 서버 스트림 요청 (GET)")
        MCP_RECEIPT = "mcp.receipt", _("MCP 호출 영수증 조회")
        MCP_SESSION_END = "mcp.session_end", _("MCP 세션 종료 요청 (DELETE)")
        SERVER_CREATED = "registry.server_created", _("서버 등록")
        SERVER_UPDATED = "registry.server_updated", _("서버 변경")
        SERVER_DELETED = "registry.server_deleted", _("서버 삭제")
        SERVER_CHECKED = "registry.server_checked", _("서버 상태 확인")
        DELEGATION_ISSUED = "registry.delegation_issued", _("위임 발급")
        DELEGATION_REGISTERED = "registry.delegation_registered", _("위임 등록")
        DELEGATION_REVOKED = "registry.delegation_revoked", _("위임 폐기")
        DELEGATION_GRANTED = "delegation.granted", _("에이전트 로그인 승인")
        DELEGATION_REFRESHED = "delegation.refreshed", _("에이전트 접근 토큰 갱신")
        OAUTH_CLIENT_CREATED = "oauth.client_created", _("OAuth 클라이언트 등록")
        OAUTH_CLIENT_CHANGED = "oauth.client_changed", _("OAuth 클라이언트 변경")
        OAUTH_TOKEN_REFUSED = "oauth.token_refused", _("OAuth 토큰 요청 거부")
        STAKEHOLDER_LINK_CHANGED = "signin.stakeholder_link_changed", _("로그인-관계자 연결 변경")
        ENTERPRISE_IDP_CHANGED = "signin.enterprise_idp_changed", _("엔터프라이즈 IdP 변경")
        DELEGATION_RENEWED = "registry.delegation_renewed", _("위임 갱신")
        TOOL_PINNED = "registry.tool_pinned", _("도구 고정")
        TOOL_CHANGED = "registry.tool_changed", _("도구 정의 변경")
        TOOL_QUARANTINED = "registry.tool_quarantined", _("도구 격리")
        TOOL_PIN_APPROVED = "registry.tool_pin_approved", _("도구 고정 승인")
        CONSOLE_DISCOVER = "console.discover", _("콘솔 탐색")
        CONSOLE_CALL = "console.call", _("콘솔 호출")
        CONSOLE_TURN_VIEWED = "console.turn_viewed", _("콘솔 기록 열람")
        CONSOLE_ANSWER_DOWNLOADED = "console.answer_downloaded", _("콘솔 답변 CSV 내려받기")
        CONSOLE_HISTORY_EXPIRED = "console.history_expired", _("콘솔 기록 보관 기간 만료 삭제")
        API_TOKEN_ISSUED = "core.api_token_issued", _("API 토큰 발급")
        API_TOKEN_REVOKED = "core.api_token_revoked", _("API 토큰 폐기")
        USER_CREATED = "auth.user_created", _("사용자 생성")
        USER_CHANGED = "auth.user_changed", _("사용자 변경")
        USER_DELETED = "auth.user_deleted", _("사용자 삭제")
        USER_PASSWORD_SET = "auth.user_password_set", _("사용자 비밀번호 설정")
        AUTH_LOGIN_FAILED = "auth.login_failed", _("로그인 실패")
        AUTH_LOCKED_OUT = "auth.locked_out", _("로그인 잠금")
        TOTP_DEVICE_ADDED = "auth.totp_device_added", _("인증 앱 등록")
        TOTP_DEVICE_REMOVED = "auth.totp_device_removed", _("인증 앱 삭제")
        GROUP_CREATED = "auth.group_created", _("그룹 생성")
        GROUP_CHANGED = "auth.group_changed", _("그룹 변경")
        GROUP_DELETED = "auth.group_deleted", _("그룹 삭제")
        SSO_SIGNED_IN = "auth.sso_signed_in", _("SSO 로그인")
        SSO_REFUSED = "auth.sso_refused", _("SSO 로그인 거부")
        SIGNING_KEY_RETIRED = "audit.signing_key_retired", _("서명 키 퇴역")
        AUDIT_EXPORTED = "audit.exported", _("감사 로그 내보내기")

    class Outcome(models.TextChoices):
        ALLOWED = "allowed", _("허용")
        UNAUTHENTICATED = "unauthenticated", _("인증 실패 (401)")
        FORBIDDEN = "forbidden", _("권한 없음 (403)")
        REFUSED_ORIGIN = "refused_origin", _("Origin 거부")
        REFUSED_HOST = "refused_host", _("Host 거부")
        RATE_LIMITED = "rate_limited", _("요청 과다 (429)")
        MALFORMED = "malformed", _("잘못된 요청")
        TOO_LARGE = "too_large", _("요청 크기 초과")
        TOOL_ERROR = "tool_error", _("도구 오류")
        ERROR = "error", _("서버 오류")
        CHANGED = "changed", _("변경")
        SUMMARY = "summary", _("요약 (예산을 넘은 거부 집계)")
        # The tool answered, with a refusal: the question was read and not run (its reason says
        # why: out_of_data, unread_words, masked_condition, proof_disagrees, not_understood).
        REFUSED = "refused", _("질문 거부")
        # A request the protocol allows and this server does not offer (MCP Streamable HTTP: GET
        # for a server-sent stream, DELETE to end a session), answered 405 as the spec says.
        NOT_OFFERED = "not_offered", _("제공하지 않는 요청 (405)")

    class Reason(models.TextChoices):
        """Why an /mcp request was refused or failed, as its event's detail stores it. Not a
        database constraint: `detail` also holds other services' free text."""

        HOST = "host", _("허용되지 않은 Host")
        ORIGIN = "origin", _("허용되지 않은 Origin")
        METHOD = "method", _("POST가 아닌 HTTP 메서드")
        CONTENT_TYPE = "content_type", _("JSON이 아닌 Content-Type")
        TOO_LARGE = "too_large", _("본문 크기 초과")
        MALFORMED = "malformed", _("잘못된 JSON-RPC 메시지")
        MISSING_TOKEN = "missing_token", _("토큰 없음")
        MALFORMED_TOKEN = "malformed_token", _("형식이 잘못된 토큰")
        UNKNOWN_TOKEN = "unknown", _("알 수 없는 토큰")
        EXPIRED_TOKEN = "expired", _("만료된 토큰")
        REVOKED_TOKEN = "revoked", _("폐기된 토큰")
        WRONG_AUDIENCE = "wrong_audience", _("다른 리소스용 토큰")
        AUTH_RATE_LIMITED = "auth_rate_limited", _("주소별 인증 실패 한도 초과")
        RATE_LIMITED = "rate_limited", _("위임별 요청 한도 초과")
        STAKEHOLDER_NOT_PERMITTED = "stakeholder_not_permitted", _("조회할 수 없는 관계자")
        TOOL_NOT_DELEGATED = "tool_not_delegated", _("위임되지 않은 도구")
        INVALID_ARGUMENTS = "invalid_arguments", _("잘못된 도구 인자")
        POLICY_REFUSED = "policy_refused", _("정책에 따른 거부")
        MASKED_CONDITION = "masked_condition", _("마스킹된 컬럼에 대한 조건")
        UNREAD_WORDS = "unread_words", _("반영할 수 없는 말이 있는 질문")
        OUT_OF_DATA = "out_of_data", _("KB에 없는 데이터에 대한 질문")
        PROOF_DISAGREES = "proof_disagrees", _("두 번 읽은 뜻이 다른 질문")
        NOT_UNDERSTOOD = "not_understood", _("읽을 수 없는 질문")
        RECEIPT_UNKNOWN = "receipt_unknown", _("없는 영수증 (이 위임의 호출이 아님)")
        RECEIPT_PENDING = "receipt_pending", _("아직 체크포인트가 덮지 않은 호출")
        INVALID_PLAN = "invalid_plan", _("잘못된 조회 계획")
        ENGINE_ERROR = "engine_error", _("조회 엔진 오류")
        EXCEPTION = "exception", _("처리 중 예외")

    # Outcomes of a request that got no answer: refused at the gate, by the policy, or by the tool
    # (a question it would not run). The dashboard, the list's filter and the overview count these.
    REFUSED_OUTCOMES = (
        Outcome.UNAUTHENTICATED,
        Outcome.FORBIDDEN,
        Outcome.RATE_LIMITED,
        Outcome.REFUSED_ORIGIN,
        Outcome.REFUSED_HOST,
        Outcome.MALFORMED,
        Outcome.TOO_LARGE,
        Outcome.REFUSED,
    )

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    source = models.CharField(_("출처"), max_length=32, default="hyperbook")
    sequence = models.PositiveBigIntegerField(_("순번"))
    occurred_at = models.DateTimeField(_("발생 시각"), db_index=True)
    action = models.CharField(_("동작"), max_length=64)
    # Choices, so that the admin's outcome filter lists them instead of scanning the table.
    outcome = models.CharField(_("결과"), max_length=32, choices=Outcome.choices)
    http_status = models.PositiveSmallIntegerField(_("HTTP 상태"), null=True, blank=True)
    request_id = models.CharField(_("요청 ID"), max_length=64, blank=True)
    # What the client called its request (X-Request-ID), as it sent it: never our id, may repeat.
    # Nullable so that adding it rewrote no table: SQLite rebuilds a table to add a NOT NULL
    # column, and the rebuild would drop the append-only trigger with the old table.
    client_request_id = models.CharField(  # noqa: DJ001
        _("클라이언트 요청 ID"), max_length=128, null=True, blank=True
    )
    rpc_method = models.CharField(_("JSON-RPC 메서드"), max_length=64, blank=True)
    tool = models.CharField(_("도구"), max_length=128, blank=True)
    stakeholder_id = models.CharField(_("관계자 ID"), max_length=16, blank=True)
    stakeholder_role = models.CharField(_("역할"), max_length=32, blank=True)
    delegation_id = models.BigIntegerField(_("위임 ID"), null=True, blank=True)
    token_prefix = models.CharField(_("토큰 접두어"), max_length=16, blank=True)
    token_fingerprint = models.CharField(_("토큰 지문"), max_length=64, blank=True)
    client_address = models.CharField(_("클라이언트 주소"), max_length=64, blank=True)
    origin = models.CharField(_("Origin"), max_length=256, blank=True)
    user_agent = models.CharField(_("User-Agent"), max_length=256, blank=True)
    latency_ms = models.FloatField(_("처리 시간(ms)"), null=True, blank=True)
    row_count = models.IntegerField(_("반환 행 수"), null=True, blank=True)
    masked_columns = models.JSONField(_("마스킹 컬럼"), default=list, blank=True)
    prompt_length = models.IntegerField(_("질문 길이"), null=True, blank=True)
    prompt_hash = models.CharField(_("질문 지문"), max_length=64, blank=True)
    actor = models.CharField(_("관리자"), max_length=150, blank=True)
    target = models.CharField(_("대상"), max_length=128, blank=True)
    changes = models.JSONField(_("변경 내용"), default=dict, blank=True)
    detail = models.CharField(_("사유"), max_length=128, blank=True)
    prev_hash = models.CharField(_("이전 해시"), max_length=64)
    # Not indexed: nothing looks an event up by its hash (the chain check walks by sequence).
    hash = models.CharField(_("해시"), max_length=64)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-occurred_at", "-sequence"]
        constraints = [
            models.UniqueConstraint(fields=["source", "sequence"], name="audit_unique_sequence")
        ]
        indexes = [
            models.Index(fields=["request_id"], name="audit_request_id"),
            models.Index(fields=["client_request_id"], name="audit_client_request_id"),
            models.Index(fields=["outcome", "occurred_at"], name="audit_outcome_time"),
            models.Index(fields=["action", "occurred_at"], name="audit_action_time"),
            models.Index(fields=["stakeholder_id", "occurred_at"], name="audit_stakeholder_time"),
            models.Index(fields=["http_status", "occurred_at"], name="audit_status_time"),
            models.Index(fields=["tool", "occurred_at"], name="audit_tool_time"),
        ]
        verbose_name = _("감사 이벤트")
        verbose_name_plural = pgettext_lazy("plural", "감사 이벤트")

    def __str__(self) -> str:
        return f"#{self.sequence} {self.action} {self.outcome}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("audit events are append-only")


class ChainHead(models.Model):
    """The last link of a source's chain, locked while events are appended so none interleave,
    and the right edge of its Merkle tree: the hashes of the perfect subtrees its leaves split
    into (`audit.merkle.frontier_append`), hex, concatenated, so an append reads no node."""

    source = models.CharField(max_length=32, primary_key=True)
    last_sequence = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64)
    tree_frontier = models.TextField(default="", blank=True)

    def __str__(self) -> str:
        return f"{self.source} #{self.last_sequence}"


class DeliveryCursor(models.Model):
    """How far a source's events have been queued for delivery (given their Delivery row).

    The event row is the outbox entry: appending it is the only write a request pays for, and the
    delivery worker queues new events in sequence order from here."""

    source = models.CharField(max_length=32, primary_key=True)
    queued_sequence = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.source} queued to #{self.queued_sequence}"


class Delivery(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", _("대기")
        DELIVERED = "delivered", _("전달됨")
        REJECTED = "rejected", _("거부됨")

    event = models.OneToOneField(
        AuditEvent, on_delete=models.PROTECT, primary_key=True, related_name="delivery"
    )
    sequence = models.PositiveBigIntegerField()  # copied so pending work is read in order cheaply
    state = models.CharField(
        _("전달 상태"), max_length=16, choices=State.choices, default=State.PENDING
    )
    attempts = models.PositiveIntegerField(_("시도 횟수"), default=0)
    next_attempt_at = models.DateTimeField(_("다음 시도"), null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_id = models.UUIDField(null=True, blank=True)
    last_error = models.CharField(_("마지막 오류"), max_length=300, blank=True)
    delivered_at = models.DateTimeField(_("전달 시각"), null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["sequence"],
                name="audit_delivery_pending",
                condition=models.Q(state="pending"),
            ),
            models.Index(fields=["state"], name="audit_delivery_state"),
        ]
        verbose_name = _("전달 상태")
        verbose_name_plural = pgettext_lazy("plural", "전달 상태")

    def __str__(self) -> str:
        return f"#{self.sequence} {self.state}"


class SinkStatus(models.Model):
    """How the Memory API is doing, as the delivery workers last saw it: one row per sink.

    Backoff belongs to the sink's health, not to each event's attempts: while the sink fails,
    nobody posts until `retry_at`; the first answer it gives again makes the whole backlog due.
    The worker's heartbeat and the last error are here too, for /healthz."""

    name = models.CharField(max_length=32, primary_key=True)
    worker_seen_at = models.DateTimeField(_("작업자 마지막 확인"), null=True, blank=True)
    last_success_at = models.DateTimeField(_("마지막 전달 성공"), null=True, blank=True)
    last_error = models.CharField(_("마지막 오류"), max_length=300, blank=True)
    last_error_at = models.DateTimeField(_("마지막 오류 시각"), null=True, blank=True)
    failures = models.PositiveIntegerField(_("연속 실패"), default=0)
    retry_at = models.DateTimeField(_("다음 시도"), null=True, blank=True)

    class Meta:
        verbose_name = _("전달 대상 상태")
        verbose_name_plural = pgettext_lazy("plural", "전달 대상 상태")

    def __str__(self) -> str:
        return f"{self.name}: {self.failures} failure(s)"


class DeliveryAlarm(models.Model):
    """Operator-visible problems with the Memory API (e.g. a rejected credential)."""

    # It holds another copy of one of our checkpoints: cleared by no later delivery.
    CHECKPOINT_CONFLICT = "checkpoint_conflict"

    raised_at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=64)
    message = models.CharField(max_length=300)
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-raised_at"]
        verbose_name = _("전달 경보")
        verbose_name_plural = pgettext_lazy("plural", "전달 경보")

    def __str__(self) -> str:
        return self.message


class ChainVerification(models.Model):
    """A chain check: asked for by an auditor (run by a worker) or by the command, and its
    result once done. An incremental check starts at the last signed checkpoint a check verified
    (`verified_through`); a full one reads the whole chain."""

    class State(models.TextChoices):
        QUEUED = "queued", _("대기 중")
        RUNNING = "running", _("검증 중")
        DONE = "done", _("완료")

    checked_at = models.DateTimeField(auto_now_add=True)  # when it was asked for
    state = models.CharField(max_length=8, choices=State.choices, default=State.DONE)
    full = models.BooleanField(default=True)
    requested_by = models.CharField(max_length=150, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(null=True)  # None until done, or when it could not run at all
    events_checked = models.PositiveBigIntegerField(default=0)
    verified_through = models.PositiveBigIntegerField(default=0)  # the last sequence found intact
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-checked_at"]

    def __str__(self) -> str:
        return self.message


class AuditTreeNode(models.Model):
    """A completed node of a source's RFC 6962 Merkle tree over its events (`audit.merkle`): the
    root of the perfect subtree over leaves [index · 2^level, (index + 1) · 2^level); level 0 holds
    the leaves. Written in the transaction of the events that complete it, append-only like them,
    so a proof reads O(log n) rows."""

    source = models.CharField(max_length=32)
    level = models.PositiveSmallIntegerField()
    index = models.PositiveBigIntegerField()
    hash = models.CharField(max_length=64)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "level", "index"], name="audit_unique_node")
        ]

    def __str__(self) -> str:
        return f"{self.source} node {self.level}/{self.index}"

    def save(self, *args, **kwargs):
        raise TypeError("tree nodes are written with the events that complete them")

    def delete(self, *args, **kwargs):
        raise TypeError("tree nodes are append-only")


class AuditCheckpoint(models.Model):
    """A signed statement of the log at a size: "the Merkle tree over events #1..#sequence has
    the root `hash`" (C2SP signed-note and tlog-checkpoint). Its signed note is the proof; the
    other columns repeat what it says, for queries. Append-only, like the events it covers.

    Checkpoints signed before the tree existed sign the chain's head instead: their `head_hash`
    is empty and their `hash` is event #sequence's own hash. The first checkpoint with a
    `head_hash` marks where the rule changed; no checkpoint after it uses the old rule."""

    id = models.UUIDField(primary_key=True, editable=False)  # the Memory API's id for it
    source = models.CharField(_("출처"), max_length=32)
    number = models.PositiveBigIntegerField(_("번호"))  # 1, 2, 3… per source, gap-free
    sequence = models.PositiveBigIntegerField(_("마지막 이벤트 순번"))
    hash = models.CharField(_("루트 해시"), max_length=64)
    prev_hash = models.CharField(_("이전 체크포인트 해시"), max_length=64)
    # Nullable, so adding it leaves the rows (and SQLite's append-only trigger) as they are.
    head_hash = models.CharField(_("체인 헤드 해시"), max_length=64, null=True, blank=True)  # noqa: DJ001
    origin = models.CharField(_("오리진"), max_length=200)
    key_id = models.CharField(_("키 ID"), max_length=8)
    note = models.TextField(_("서명된 체크포인트"))
    created_at = models.DateTimeField(_("생성 시각"))

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["-source", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["source", "number"], name="audit_unique_checkpoint")
        ]
        verbose_name = _("서명된 체크포인트")
        verbose_name_plural = pgettext_lazy("plural", "서명된 체크포인트")

    def __str__(self) -> str:
        return f"{self.source} checkpoint {self.number} (#{self.sequence})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("audit checkpoints are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("audit checkpoints are append-only")

    def witnessed_note(self) -> str:
        """The signed note with the witnesses' cosignature lines after ours, as signed-note
        readers (and `python -m audit.verify --witness-key`) take it."""
        return self.note + "".join(c.line + "\n" for c in self.cosignatures.order_by("witness_key"))


class CheckpointDelivery(models.Model):
    """A checkpoint's delivery to the Memory API (kept apart: the checkpoint never changes)."""

    checkpoint = models.OneToOneField(
        AuditCheckpoint, on_delete=models.PROTECT, primary_key=True, related_name="delivery"
    )
    state = models.CharField(
        _("전달 상태"),
        max_length=16,
        choices=Delivery.State.choices,
        default=Delivery.State.PENDING,
    )
    attempts = models.PositiveIntegerField(_("시도 횟수"), default=0)
    last_error = models.CharField(_("마지막 오류"), max_length=300, blank=True)
    delivered_at = models.DateTimeField(_("전달 시각"), null=True, blank=True)

    class Meta:
        verbose_name = _("체크포인트 전달 상태")
        verbose_name_plural = pgettext_lazy("plural", "체크포인트 전달 상태")

    def __str__(self) -> str:
        return f"checkpoint {self.checkpoint_id}: {self.state}"


class SigningKey(models.Model):
    """Every key that has signed a checkpoint, public half only: old keys stay listed after a
    rotation, so that the checkpoints they signed can still be checked."""

    key_id = models.CharField(_("키 ID"), max_length=8)
    name = models.CharField(_("키 이름"), max_length=200)
    verifier_key = models.CharField(_("검증 키"), max_length=300, unique=True)
    first_used_at = models.DateTimeField(_("처음 서명"))
    # Set once, when an administrator retires the key after a rotation: the last checkpoint size it
    # signed. Checkpoints it signs beyond that are refused, even where configuration trusts it.
    retired_at = models.DateTimeField(_("퇴역"), null=True, blank=True)
    last_size = models.PositiveBigIntegerField(_("마지막 서명 위치"), null=True, blank=True)

    class Meta:
        ordering = ["-first_used_at"]
        verbose_name = _("서명 키")
        verbose_name_plural = pgettext_lazy("plural", "서명 키")

    def __str__(self) -> str:
        return self.verifier_key


class WitnessState(models.Model):
    """What one witness of AUDIT_WITNESSES (C2SP tlog-witness) has cosigned for us: the size of the
    latest checkpoint, which the next request's consistency proof starts from, and whether it is
    failing. The witness's own record is the authority; a 409 from it resets ours."""

    verifier_key = models.CharField(_("증인 키"), max_length=300, unique=True)
    name = models.CharField(_("이름"), max_length=200)
    url = models.CharField(_("주소"), max_length=500)
    last_size = models.PositiveBigIntegerField(_("마지막 연서 크기"), default=0)
    last_cosigned_at = models.DateTimeField(_("마지막 연서 시각"), null=True, blank=True)
    failing_since = models.DateTimeField(_("실패 시작"), null=True, blank=True)
    last_problem = models.CharField(_("마지막 문제"), max_length=300, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("증인")
        verbose_name_plural = pgettext_lazy("plural", "증인")

    def __str__(self) -> str:
        return self.name


class Cosignature(models.Model):
    """A witness's cosignature line on one of our checkpoints, as it returned it. The checkpoint's
    note with these lines appended is the witnessed note (`AuditCheckpoint.witnessed_note`)."""

    checkpoint = models.ForeignKey(
        AuditCheckpoint, on_delete=models.PROTECT, related_name="cosignatures"
    )
    witness_key = models.CharField(max_length=300)
    line = models.TextField()
    cosigned_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["checkpoint", "witness_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint", "witness_key"], name="audit_one_cosignature_per_witness"
            )
        ]

    def __str__(self) -> str:
        return f"{self.witness_key.split('+')[0]} on checkpoint {self.checkpoint_id}"
