"""The auditors' read-only view of the audit log: filters, search by request id, chain status,
the signed checkpoints and the keys that verify them."""

from datetime import datetime, timedelta
from urllib.parse import urlencode

import orjson
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from audit import selectors
from audit.checkpoints import KeyRetirementError, signing_key_retire
from audit.delivery import delivery_enabled
from audit.downloads import event_list_download
from audit.export import ExportError
from audit.models import AuditCheckpoint, AuditEvent, Delivery, DeliveryAlarm, SigningKey
from audit.overview import HOUR_FORMAT, SUMMARIES_READ_MAX, audit_overview
from audit.proofs import ProofError, proof_bundle
from audit.services import audit_change
from audit.verification import (
    FullCheckTooSoon,
    verification_in_progress,
    verification_request,
)
from audit.wording import reason_label
from core.admin import ReadOnlyAdmin
from core.charts import Series, stacked_bar_chart

COUNT_CAP = 10_000
RETIRE_KEY_PERMISSION = "audit.change_signingkey"


class CappedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows: an exact COUNT(*) over millions of events is too slow."""

    @cached_property
    def count(self):
        return self.object_list.order_by()[: COUNT_CAP + 1].count()


class TimeRangeFilter(admin.SimpleListFilter):
    title = _("기간")
    parameter_name = "range"

    def lookups(self, request, model_admin):
        return [
            ("today", _("오늘")),
            ("1h", _("최근 1시간")),
            ("24h", _("최근 24시간")),
            ("7d", _("최근 7일")),
            ("30d", _("최근 30일")),
        ]

    def queryset(self, request, queryset):
        start = selectors.since(self.value() or "")
        return queryset.filter(occurred_at__gte=start) if start else queryset


class RefusedFilter(admin.SimpleListFilter):
    title = _("거부 여부")
    parameter_name = "refused"

    def lookups(self, request, model_admin):
        return [("1", _("거부된 요청만"))]

    def queryset(self, request, queryset):
        if self.value() == "1":
            return queryset.filter(outcome__in=AuditEvent.REFUSED_OUTCOMES)
        return queryset


class StatusFilter(admin.SimpleListFilter):
    title = _("HTTP 상태")
    parameter_name = "http_status"

    def lookups(self, request, model_admin):
        return [
            (str(code), str(code)) for code in (200, 400, 401, 403, 405, 413, 415, 429, 500, 503)
        ]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(http_status=int(value)) if value and value.isdigit() else queryset


class ActionFilter(admin.SimpleListFilter):
    title = _("동작")
    parameter_name = "action"

    def lookups(self, request, model_admin):
        return [(action.value, action.value) for action in AuditEvent.Action]

    def queryset(self, request, queryset):
        return queryset.filter(action=self.value()) if self.value() else queryset


class OneValueFilter(admin.SimpleListFilter):
    """A filter the overview's links set (an hour, a reason): it lists only the value in use."""

    def lookups(self, request, model_admin):
        value = self.value()
        return [(value, self.label(value))] if value else []

    def label(self, value: str) -> str:
        return value


class HourFilter(OneValueFilter):
    title = _("시간")
    parameter_name = "hour"

    def label(self, value: str) -> str:
        return value.replace("T", " ") + ":00"

    def queryset(self, request, queryset):
        try:
            start = timezone.make_aware(datetime.strptime(self.value() or "", HOUR_FORMAT))
        except ValueError:
            return queryset  # an hour that is not one shows everything, as no filter would
        return queryset.filter(occurred_at__gte=start, occurred_at__lt=start + timedelta(hours=1))


class ReasonFilter(OneValueFilter):
    title = _("사유")
    parameter_name = "reason"

    def label(self, value: str) -> str:
        return reason_label(value)

    def queryset(self, request, queryset):
        return queryset.filter(detail=self.value()) if self.value() else queryset


class StakeholderFilter(admin.SimpleListFilter):
    title = _("관계자")
    parameter_name = "stakeholder_id"

    def lookups(self, request, model_admin):
        return [(value, value) for value in selectors.values_seen("stakeholder_id")]

    def queryset(self, request, queryset):
        return queryset.filter(stakeholder_id=self.value()) if self.value() else queryset


class ToolFilter(admin.SimpleListFilter):
    title = _("도구")
    parameter_name = "tool"

    def lookups(self, request, model_admin):
        return [(value, value) for value in selectors.values_seen("tool")]

    def queryset(self, request, queryset):
        return queryset.filter(tool=self.value()) if self.value() else queryset


# What a pending event's delivery reads as while no sink is configured: nothing is waiting.
DELIVERY_OFF = _("꺼짐 (전달 대상 없음)")


class DeliveryStateFilter(admin.SimpleListFilter):
    title = _("전달 상태")
    parameter_name = "delivery_state"

    def lookups(self, request, model_admin):
        return Delivery.State.choices

    def queryset(self, request, queryset):
        value = self.value()
        return selectors.with_delivery_state(queryset, value) if value else queryset


class ExchangeFilter(admin.SimpleListFilter):
    """`?exchange=<id>`: the events of one console exchange (one client request id). Offers no
    choices of its own; links lead here, and the chosen id is shown so that it can be cleared."""

    title = _("교환")
    parameter_name = "exchange"

    def lookups(self, request, model_admin):
        # A filter without choices is not applied at all: a malformed id must still list nothing.
        value = self.value()
        if not value:
            return []
        return [(value, value if selectors.is_exchange_id(value) else _("올바르지 않은 교환 ID"))]

    def queryset(self, request, queryset):
        value = self.value()
        return selectors.exchange_events(queryset, exchange_id=value) if value else queryset


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = (
        "occurred_at",
        "sequence",
        "action",
        "outcome",
        "http_status",
        "stakeholder_id",
        "tool",
        "request_id",
        "latency_ms",
        "row_count",
        "delivery_state",
    )
    list_filter = (
        TimeRangeFilter,
        HourFilter,
        "outcome",
        RefusedFilter,
        ReasonFilter,
        StatusFilter,
        ActionFilter,
        StakeholderFilter,
        ToolFilter,
        DeliveryStateFilter,
        ExchangeFilter,
    )
    # Request ids match exactly (indexed); action, reason and tool match a part of their text, and
    # a reason also by its name ("형식이 잘못된 토큰" finds malformed_token).
    search_fields = ("=request_id", "action", "detail", "tool", "client_request_id")
    search_help_text = _("동작, 사유, 도구, 요청 ID 또는 클라이언트 요청 ID로 찾기")
    change_form_template = "admin/audit/auditevent/change_form.html"
    list_select_related = ("delivery",)
    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50
    ordering = ("-occurred_at", "-sequence")
    change_list_template = "admin/audit/auditevent/change_list.html"
    readonly_fields = [
        name
        for f in AuditEvent._meta.concrete_fields
        for name in ((f.name, "reason_words") if f.name == "detail" else (f.name,))
    ] + [
        "delivery_state",
        "delivery_attempts",
        "delivery_error",
    ]

    @admin.display(description=_("사유"))
    def reason_words(self, obj):
        return reason_label(obj.detail) if obj.detail else "-"

    @admin.display(description=_("전달 상태"))
    def delivery_state(self, obj):
        delivery = selectors.event_delivery(obj)
        if delivery.state == Delivery.State.PENDING and not delivery_enabled():
            return DELIVERY_OFF
        return delivery.get_state_display()

    @admin.display(description=_("전달 시도"))
    def delivery_attempts(self, obj):
        return selectors.event_delivery(obj).attempts

    @admin.display(description=_("전달 오류"))
    def delivery_error(self, obj):
        return selectors.event_delivery(obj).last_error or "-"

    def get_search_results(self, request, queryset, search_term):
        queryset, duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip().lower()
        named = [
            code for code, label in AuditEvent.Reason.choices if term and term in str(label).lower()
        ]
        if named:
            queryset |= self.model.objects.filter(detail__in=named)
        return queryset, duplicates

    def change_view(self, request, object_id, form_url="", extra_context=None):
        event = self.get_object(request, object_id)
        related = {}
        if event is not None:
            related = {
                "same_request_url": (
                    _events_url(request_id=event.request_id) if event.request_id else ""
                ),
                "same_request_count": (
                    AuditEvent.objects.filter(request_id=event.request_id)
                    .exclude(pk=event.pk)
                    .count()
                    if event.request_id
                    else 0
                ),
                "exchange_url": (
                    _events_url(exchange=event.client_request_id) if event.client_request_id else ""
                ),
                "delegation_url": _delegation_url(event),
                "access_url": (
                    reverse("admin:registry_stakeholder_access", args=[event.stakeholder_id])
                    if event.stakeholder_id and request.user.has_perm("registry.explain_access")
                    else ""
                ),
            }
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), **related}
        )

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "chain_status": selectors.chain_status(),
            "chain_check": verification_in_progress(),
            "open_alarms": list(selectors.open_alarms()[:5]),
            "latest_checkpoint": selectors.latest_checkpoint(),
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        return [
            path("verify/", self.admin_site.admin_view(self.verify_view), name="audit_verify"),
            path(
                "overview/",
                self.admin_site.admin_view(self.overview_view),
                name="audit_overview",
            ),
            path("export/", self.admin_site.admin_view(self.export_view), name="audit_export"),
            path(
                "<path:object_id>/proof/",
                self.admin_site.admin_view(self.proof_view),
                name="audit_event_proof",
            ),
            *super().get_urls(),
        ]

    def overview_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        overview = audit_overview()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("감사 개요 (최근 24시간)"),
            "overview": overview,
            "chart": overview_chart(overview),
            "refusal_links": [
                (entry, _events_url(reason=entry.reason, range="24h"))
                for entry in overview.refusals
            ],
            "outcome_links": [
                (
                    AuditEvent.Outcome(outcome).label,
                    sum(counts),
                    _events_url(outcome__exact=outcome, range="24h"),
                )
                for outcome, counts in overview.by_outcome.items()
            ],
            "pending_url": _events_url(delivery_state="pending"),
            "summaries_read_max": SUMMARIES_READ_MAX,
            "witnessing": selectors.witnessing(overview.checkpoint),
        }
        return TemplateResponse(request, "admin/audit/overview.html", context)

    def export_view(self, request):
        """The list as filtered, as a file the standalone verifier proves (audit.downloads); the
        export is audited after the file's extent is fixed, so its own event is not in it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        events = self.get_changelist_instance(request).get_queryset(request)
        query = request.GET.urlencode()
        try:
            lines = event_list_download(events, filtered=bool(query))
        except ExportError as exc:
            messages.error(request, str(exc))
            return redirect(f"{reverse('admin:audit_auditevent_changelist')}?{query}")
        audit_change(
            action=AuditEvent.Action.AUDIT_EXPORTED,
            actor=request.user,
            target="audit_events",
            before=None,
            after={"filter": query, "format": "jsonl" if not query else "proof_bundle"},
        )
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.jsonl"'
        response["Cache-Control"] = "no-store"
        return response

    def proof_view(self, request, object_id):
        """The event with its inclusion proof and the checkpoint it is proven against, as a file
        `python -m audit.verify` checks on its own; the download is audited like an export."""
        event = self.get_object(request, object_id)
        if event is None or not self.has_view_permission(request, event):
            raise PermissionDenied
        try:
            lines = [orjson.dumps(line).decode() + "\n" for line in proof_bundle([event.sequence])]
        except ProofError as exc:
            messages.error(request, str(exc))
            return redirect(reverse("admin:audit_auditevent_change", args=[event.pk]))
        audit_change(
            action=AuditEvent.Action.AUDIT_EXPORTED,
            actor=request.user,
            target="audit_events",
            before=None,
            after={"prove": event.sequence, "format": "proof"},
        )
        response = HttpResponse("".join(lines), content_type="application/x-ndjson")
        response["Content-Disposition"] = (
            f'attachment; filename="audit-event-{event.sequence}-proof.jsonl"'
        )
        response["Cache-Control"] = "no-store"
        return response

    def verify_view(self, request):
        if request.method != "POST" or not self.has_view_permission(request):
            return redirect(reverse("admin:audit_auditevent_changelist"))
        try:
            check, queued = verification_request(
                full=request.POST.get("full") == "1", requested_by=request.user.get_username()
            )
        except FullCheckTooSoon as exc:
            messages.warning(
                request,
                _("전체 검증은 %(next_at)s 이후에 다시 요청할 수 있습니다.")
                % {"next_at": timezone.localtime(exc.next_at).strftime("%Y-%m-%d %H:%M")},
            )
        else:
            if check.state == check.State.DONE and check.ok is None:
                messages.error(request, check.message)
            elif queued:
                messages.info(request, _("검증을 요청했습니다. 결과는 준비되면 여기에 표시됩니다."))
            else:
                messages.info(
                    request,
                    _("%(at)s에 요청된 검증이 있습니다 (%(state)s).")
                    % {
                        "at": timezone.localtime(check.checked_at).strftime("%H:%M:%S"),
                        "state": check.get_state_display(),
                    },
                )
        return redirect(reverse("admin:audit_auditevent_changelist"))


@admin.register(DeliveryAlarm)
class DeliveryAlarmAdmin(ReadOnlyAdmin):
    list_display = ("raised_at", "kind", "message", "cleared_at")


@admin.register(AuditCheckpoint)
class AuditCheckpointAdmin(ReadOnlyAdmin):
    list_display = (
        "number",
        "sequence",
        "created_at",
        "key_id",
        "root_rule",
        "cosignature_count",
        "delivery_state",
    )
    list_select_related = ("delivery",)
    ordering = ("-number",)
    readonly_fields = (
        "number",
        "source",
        "origin",
        "sequence",
        "root_rule",
        "hash",
        "head_hash",
        "cosignature_count",
        "prev_hash",
        "key_id",
        "created_at",
        "delivery_state",
        "note",
    )
    fields = readonly_fields
    change_list_template = "admin/audit/auditcheckpoint/change_list.html"

    @admin.display(description=_("전달 상태"))
    def delivery_state(self, obj):
        delivery = getattr(obj, "delivery", None)
        if delivery is None:
            return "-"
        if delivery.state == Delivery.State.PENDING and not delivery_enabled():
            return DELIVERY_OFF
        return delivery.get_state_display()

    @admin.display(description=_("서명 대상"))
    def root_rule(self, obj):
        # The tree size is the checkpoint's sequence; before the tree, the chain's head was signed.
        return _("머클 트리 루트") if obj.head_hash else _("체인 헤드 (트리 이전)")

    @admin.display(description=_("증인 연서"))
    def cosignature_count(self, obj):
        return (
            f"{obj.cosigned} / {settings.AUDIT_WITNESS_QUORUM}" if settings.AUDIT_WITNESSES else "-"
        )

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(cosigned=Count("cosignatures"))

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "signing_keys": selectors.signing_keys(),
            "may_retire_keys": request.user.has_perm(RETIRE_KEY_PERMISSION),
            "witness_states": selectors.witness_states(),
            "witness_quorum": settings.AUDIT_WITNESS_QUORUM,
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        retire = self.admin_site.admin_view(self.retire_key_view)
        return [
            path("keys/<int:pk>/retire/", retire, name="audit_signingkey_retire"),
            *super().get_urls(),
        ]

    def retire_key_view(self, request, pk: int):
        """Records a rotated-out key's retirement: it signs nothing beyond its last checkpoint."""
        if request.method != "POST" or not request.user.has_perm(RETIRE_KEY_PERMISSION):
            raise PermissionDenied
        key = get_object_or_404(SigningKey, pk=pk)
        try:
            signing_key_retire(key=key, actor=request.user)
        except KeyRetirementError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                _("키 %(key)s을(를) 퇴역시켰습니다: #%(size)s 이후의 서명은 거부됩니다.")
                % {"key": key.key_id, "size": key.last_size},
            )
        return redirect(reverse("admin:audit_auditcheckpoint_changelist"))


def overview_chart(overview) -> str:
    """Events per hour, stacked by outcome; each bar links to that hour's events of that outcome."""
    hours = [hour.strftime(HOUR_FORMAT) for hour in overview.hours]
    series = [
        Series(
            name=str(AuditEvent.Outcome(outcome).label),
            css_class=f"outcome-{outcome}",
            values=counts,
            links=tuple(_events_url(outcome__exact=outcome, hour=hour) for hour in hours),
        )
        for outcome, counts in overview.by_outcome.items()
    ]
    labels = [_("%(hour)s시") % {"hour": hour.strftime("%H")} for hour in overview.hours]
    return stacked_bar_chart(
        labels, series, title=str(_("시간별 이벤트 (결과별)")), unit=str(_("이벤트 수 (건)"))
    )


def _delegation_url(event) -> str:
    """The event's delegation: the one it was made with, or the one it changed."""
    delegation_id = event.delegation_id
    if delegation_id is None and event.target.startswith("delegation:"):
        delegation_id = event.target.split(":", 1)[1]
    if not str(delegation_id or "").isdigit():
        return ""
    return reverse("admin:registry_tokendelegation_change", args=[int(delegation_id)])


def _events_url(**query) -> str:
    return f"{reverse('admin:audit_auditevent_changelist')}?{urlencode(query)}"


from audit import admin_access  # noqa: E402, F401  (users, groups, API tokens)
