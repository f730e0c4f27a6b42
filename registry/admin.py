from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.templatetags.static import static
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.timesince import timesince
from django.utils.translation import gettext_lazy as _

from registry.declarations import (
    KB_PROVIDER,
    PER_REQUEST_VPD_BEARER,
    DeclarationError,
    validate_mcp_server,
)
from registry.health import server_check
from registry.models import AllowedTool, McpServer, ToolPin
from registry.services import server_delete, server_save

# What the form offers: a user's VPD bearer is never among them. The KB VPD server always gets
# it (and nothing else does), so for that provider the choice is made, not offered.
OFFERED_AUTH_DELIVERIES = [
    (McpServer.AuthDelivery.NONE, McpServer.AuthDelivery.NONE.label),
    (McpServer.AuthDelivery.SERVICE_TOKEN_ENV, McpServer.AuthDelivery.SERVICE_TOKEN_ENV.label),
]


class McpServerForm(forms.ModelForm):
    auth_delivery = forms.ChoiceField(
        label=_("인증 전달"),
        choices=OFFERED_AUTH_DELIVERIES,
        initial=McpServer.AuthDelivery.NONE,
        help_text=_(
            "KB VPD 서버는 항상 요청마다 사용자 VPD Bearer를 받습니다. 다른 서버는 인증 없음 "
            "또는 토큰 환경변수(…_MCP_TOKEN)의 자체 서비스 토큰만 받습니다."
        ),
    )

    class Meta:
        model = McpServer
        fields = (
            "server_id",
            "enabled",
            "provider",
            "transport",
            "description",
            "base_url_env",
            "endpoint_path",
            "auth_delivery",
            "endpoint_url",
            "token_env",
            "default_tool",
            "router_mode",
            "timeout_seconds_env",
            "timeout_seconds",
        )

    def clean(self):
        data = super().clean()
        if data.get("provider") == KB_PROVIDER:
            data["auth_delivery"] = PER_REQUEST_VPD_BEARER
        return data


def _declaration_mapping(server: McpServer, tools: list[str]) -> dict:
    """What the admin form says, in the import file's format, so both share one validator."""
    mapping = {
        "id": server.server_id,
        "enabled": server.enabled,
        "provider": server.provider,
        "transport": server.transport,
        "auth_delivery": server.auth_delivery,
        "default_tool": server.default_tool,
        "tool_allowlist": tools,
        "router_mode": server.router_mode,
        "description": server.description,
        "timeout_seconds_env": server.timeout_seconds_env,
    }
    if server.timeout_seconds is not None:
        mapping["timeout_seconds"] = server.timeout_seconds
    # Empty optional fields are left out: a KB declaration may not carry even an empty one.
    for name in ("base_url_env", "endpoint_path", "endpoint_url", "token_env"):
        if getattr(server, name):
            mapping[name] = getattr(server, name)
    return mapping


class AllowedToolFormSet(forms.BaseInlineFormSet):
    def tool_names(self) -> list[str]:
        return [
            form.cleaned_data["tool_name"]
            for form in self.forms
            if form.cleaned_data.get("tool_name") and not form.cleaned_data.get("DELETE")
        ]

    def clean(self):
        super().clean()
        if any(self.errors):
            return
        try:
            self.declaration = validate_mcp_server(
                _declaration_mapping(self.instance, self.tool_names())
            )
        except DeclarationError as exc:
            raise ValidationError([str(error) for error in exc.errors]) from None


class AllowedToolInline(admin.TabularInline):
    model = AllowedTool
    formset = AllowedToolFormSet
    extra = 1
    min_num = 0


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ("server_id", "provider", "enabled", "health", "default_tool", "updated_at")
    list_filter = ("provider", "enabled", "router_mode")
    list_select_related = ("last_check",)
    actions = ["check_now"]
    change_form_template = "admin/registry/mcpserver/change_form.html"
    search_fields = ("server_id", "description")
    inlines = [AllowedToolInline]
    fieldsets = (
        (None, {"fields": ("server_id", "enabled", "provider", "transport", "description")}),
        (_("KB VPD 서버"), {"fields": ("base_url_env", "endpoint_path", "auth_delivery")}),
        (_("기존 선언 (벡터, custom_python)"), {"fields": ("endpoint_url", "token_env")}),
        (_("도구와 라우팅"), {"fields": ("default_tool", "router_mode")}),
        (_("타임아웃"), {"fields": ("timeout_seconds_env", "timeout_seconds")}),
    )

    @admin.display(description=_("마지막 확인"))
    def health(self, obj):
        check = getattr(obj, "last_check", None)
        if check is None:
            return _("확인한 적 없음")
        figures = [str(_("%(age)s 전") % {"age": timesince(check.checked_at)})]
        if check.latency_ms is not None:
            figures.append(f"{check.latency_ms:,} ms")
        if check.tool_count is not None:
            figures.append(str(_("도구 %(n)s개") % {"n": check.tool_count}))
        icon = "icon-yes.svg" if check.ok else "icon-no.svg"
        return format_html(
            '<span class="server-health" data-ok="{}"><img src="{}" alt="{}"> {} · {}</span>',
            "yes" if check.ok else "no",
            static(f"admin/img/{icon}"),
            _("정상") if check.ok else _("문제 있음"),
            " · ".join(figures),
            check.result,
        )

    def has_check_permission(self, request):
        # A check sends requests to the server (never a user's bearer): those who manage servers.
        return request.user.has_perm("registry.change_mcpserver")

    @admin.action(description=_("선택한 서버를 지금 확인"), permissions=["check"])
    def check_now(self, request, queryset):
        for server in queryset:
            check = server_check(server=server, actor=request.user)
            level = messages.SUCCESS if check.ok else messages.WARNING
            self.message_user(request, f"{server.server_id}: {check.result}", level)

    def check_view(self, request, pk: int):
        if request.method != "POST" or not self.has_check_permission(request):
            raise PermissionDenied
        server = get_object_or_404(McpServer, pk=pk)
        self.check_now(request, McpServer.objects.filter(pk=server.pk))
        return redirect(reverse("admin:registry_mcpserver_change", args=[pk]))

    def get_urls(self):
        check = self.admin_site.admin_view(self.check_view)
        return [
            path("<int:pk>/check/", check, name="registry_mcpserver_check"),
            *super().get_urls(),
        ]

    def get_readonly_fields(self, request, obj=None):
        # The id names the server in configuration files and audit events; it never changes.
        if obj is None:
            return ()
        return ("server_id", "auth_delivery") if obj.provider == KB_PROVIDER else ("server_id",)

    def get_deleted_objects(self, objs, request):
        # A server's tool pins go with it (its deletion is audited with its declaration); nobody
        # deletes a pin on its own, so the pin admin's refusal must not block this.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(ToolPin._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        server_delete(server=obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for server in queryset:
            server_delete(server=server, actor=request.user)

    def save_model(self, request, obj, form, change):
        # Saved in save_related, through the service, once the allowlist has been validated with it.
        pass

    def save_related(self, request, form, formsets, change):
        (tool_formset,) = [fs for fs in formsets if isinstance(fs, AllowedToolFormSet)]
        server, _ = server_save(declaration=tool_formset.declaration, actor=request.user)
        form.instance.pk = server.pk
        # The admin's change message reads these; the service did the saving.
        for formset in formsets:
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []


# The other registry admin pages live in their own modules; importing them registers them.
from registry import admin_console, admin_delegations, admin_pins  # noqa: E402, F401
