"""The auditors' read-only view of the audit log: filters, search by request id, chain status,
the signed checkpoints and the keys that verify them."""

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.shortcuts import redirect
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from audit import selectors
from audit.models import AuditCheckpoint, AuditEvent, Delivery, DeliveryAlarm
from audit.verification import verify_and_record
from core.admin import ReadOnlyAdmin

COUNT_CAP = 10_000


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
            ("1h", _("최근 1시간")),
            ("24h", _("최근 24시간")),
            ("7d", _("최근 7일")),
            ("30d", _("최근 30일")),
        ]

    def queryset(self, request, queryset):
        start = selectors.since(self.value() or "")
        return queryset.filter(occurred_at__gte=start) if start else queryset


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


class DeliveryStateFilter(admin.SimpleListFilter):
    title = _("전달 상태")
    parameter_name = "delivery_state"

    def lookups(self, request, model_admin):
        return Delivery.State.choices

    def queryset(self, request, queryset):
        value = self.value()
        return selectors.with_delivery_state(queryset, value) if value else queryset


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
        "outcome",
        StatusFilter,
        ActionFilter,
        StakeholderFilter,
        ToolFilter,
        DeliveryStateFilter,
    )
    search_fields = ("=request_id", "=client_request_id")  # exact matches: both indexed
    search_help_text = _("요청 ID 또는 클라이언트 요청 ID로 찾기 (정확히 일치)")
    list_select_related = ("delivery",)
    paginator = CappedCountPaginator
    show_full_result_count = False
    list_per_page = 50
    ordering = ("-occurred_at", "-sequence")
    change_list_template = "admin/audit/auditevent/change_list.html"
    readonly_fields = [f.name for f in AuditEvent._meta.concrete_fields] + [
        "delivery_state",
        "delivery_attempts",
        "delivery_error",
    ]

    @admin.display(description=_("전달 상태"))
    def delivery_state(self, obj):
        return selectors.event_delivery(obj).get_state_display()

    @admin.display(description=_("전달 시도"))
    def delivery_attempts(self, obj):
        return selectors.event_delivery(obj).attempts

    @admin.display(description=_("전달 오류"))
    def delivery_error(self, obj):
        return selectors.event_delivery(obj).last_error or "-"

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "chain_status": selectors.chain_status(),
            "open_alarms": list(selectors.open_alarms()[:5]),
            "latest_checkpoint": selectors.latest_checkpoint(),
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        return [
            path("verify/", self.admin_site.admin_view(self.verify_view), name="audit_verify"),
            *super().get_urls(),
        ]

    def verify_view(self, request):
        if request.method != "POST" or not self.has_view_permission(request):
            return redirect(reverse("admin:audit_auditevent_changelist"))
        report = verify_and_record()
        level = messages.SUCCESS if report.ok else messages.ERROR
        messages.add_message(request, level, report.message)
        return redirect(reverse("admin:audit_auditevent_changelist"))


@admin.register(DeliveryAlarm)
class DeliveryAlarmAdmin(ReadOnlyAdmin):
    list_display = ("raised_at", "kind", "message", "cleared_at")


@admin.register(AuditCheckpoint)
class AuditCheckpointAdmin(ReadOnlyAdmin):
    list_display = ("number", "sequence", "created_at", "key_id", "delivery_state")
    list_select_related = ("delivery",)
    ordering = ("-number",)
    readonly_fields = (
        "number",
        "source",
        "origin",
        "sequence",
        "hash",
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
        return delivery.get_state_display() if delivery else "-"

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "signing_keys": selectors.signing_keys()}
        return super().changelist_view(request, extra_context)
