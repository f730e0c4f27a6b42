"""Admin for tool pins: read-only, with a review page to approve a changed tool definition."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext_lazy as _

from registry.models import ToolPin
from registry.pinning import PinError, pin_definition_diff, pretty_definition, tool_pin_approve

APPROVE_PERMISSION = "registry.approve_toolpin"


class HeldFilter(admin.SimpleListFilter):
    title = _("상태")
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("yes", _("승인 대기 (호출 보류)")), ("no", _("고정됨"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(pending_hash="")
        if self.value() == "no":
            return queryset.filter(pending_hash="")
        return queryset


@admin.register(ToolPin)
class ToolPinAdmin(admin.ModelAdmin):
    list_display = (
        "server",
        "tool_name",
        "state_label",
        "short_hash",
        "pinned_at",
        "approved_by",
        "changed_at",
    )
    list_filter = (HeldFilter, "server")
    search_fields = ("tool_name", "server__server_id")
    list_select_related = ("server", "approved_by")
    readonly_fields = (
        "server",
        "tool_name",
        "state_label",
        "definition_hash",
        "pinned_at",
        "approved_by",
        "pending_hash",
        "changed_at",
    )
    fields = readonly_fields
    actions = ["approve_new_definition"]
    change_form_template = "admin/registry/toolpin/change_form.html"

    @admin.display(description=_("상태"))
    def state_label(self, obj):
        if obj.is_quarantined:
            return _("새 도구: 승인 전까지 격리 (호출 보류)")
        return _("승인 대기 (호출 보류)") if obj.is_held else _("고정됨")

    @admin.display(description=_("정의 해시"))
    def short_hash(self, obj):
        return obj.definition_hash[:12] or "—"

    def has_add_permission(self, request):
        return False  # pins come from discovery only

    def has_change_permission(self, request, obj=None):
        return False  # a pin changes only by approving a reviewed definition

    def has_delete_permission(self, request, obj=None):
        # Deleting a pin would let the next discovery trust whatever the server says now.
        return False

    def has_approve_permission(self, request):
        return request.user.has_perm(APPROVE_PERMISSION)

    @admin.action(description=_("변경된 정의 검토 후 승인"), permissions=["approve"])
    def approve_new_definition(self, request, queryset):
        held = list(queryset.exclude(pending_hash="")[:2])
        if len(held) != 1:
            self.message_user(
                request,
                _("변경된 정의가 있는 도구 고정을 하나만 골라 검토하세요."),
                messages.WARNING,
            )
            return None
        return redirect(reverse("admin:registry_toolpin_review", args=[held[0].pk]))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:pk>/review/", view(self.review_view), name="registry_toolpin_review"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        pin = self.get_object(request, object_id)
        extra = {**(extra_context or {}), **(self._comparison(pin) if pin else {})}
        extra["can_approve"] = self.has_approve_permission(request)
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def review_view(self, request, pk: int):
        if not self.has_approve_permission(request):
            raise PermissionDenied
        pin = get_object_or_404(ToolPin.objects.select_related("server"), pk=pk)
        change_url = reverse("admin:registry_toolpin_change", args=[pin.pk])
        if request.method == "POST":
            try:
                tool_pin_approve(
                    pin=pin, expected_hash=request.POST.get("expected_hash", ""), actor=request.user
                )
            except PinError as exc:
                messages.error(request, str(exc))
                return redirect(reverse("admin:registry_toolpin_review", args=[pk]))
            messages.success(request, _("새 정의를 승인했습니다. 이 도구의 호출이 재개됩니다."))
            return redirect(change_url)
        if not pin.is_held:
            messages.info(request, _("승인할 변경된 정의가 없습니다."))
            return redirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": pin,
            "title": _("변경된 도구 정의 검토"),
            **self._comparison(pin),
        }
        return TemplateResponse(request, "admin/registry/toolpin/review.html", context)

    @staticmethod
    def _comparison(pin: ToolPin) -> dict:
        return {
            "pinned_json": pretty_definition(pin.definition),
            "pending_json": pretty_definition(pin.pending_definition),
            "definition_diff": pin_definition_diff(pin),
        }
