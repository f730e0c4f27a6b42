"""The MCP discovery console inside the admin: thin views over registry.console."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from kb.models import Stakeholder
from registry import console
from registry.answer_chart import answer_chart
from registry.answer_export import console_answer_download
from registry.compare import console_compare
from registry.models import ConsoleTurn, McpServer


class ConsoleForm(forms.Form):
    server = forms.ModelChoiceField(
        McpServer.objects.filter(enabled=True),
        label=_("MCP 서버"),
        to_field_name="server_id",
        initial="kb_mcp",
        empty_label=None,
    )
    stakeholder = forms.ChoiceField(label=_("관계자 (토큰 프리셋)"), required=False)
    one_time_bearer = forms.CharField(
        label=_("또는 일회용 VPD 토큰"),
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        max_length=600,
    )
    prompt = forms.CharField(
        label=_("질문"), required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 80})
    )
    limit = forms.IntegerField(label=_("최대 행 수"), min_value=1, max_value=100, initial=20)
    compare_with = forms.ChoiceField(
        label=_("비교할 관계자"),
        required=False,
        help_text=_("'비교'는 같은 질문을 두 관계자로 물어 답을 나란히 보여 줍니다."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        preset_ids, self.preset_problem = console.console_presets()
        people = {s.pk: s for s in Stakeholder.objects.filter(pk__in=preset_ids)}
        self.fields["stakeholder"].choices = [("", "—")] + [
            (pk, f"{person.get_role_label()} {pk} ({person.name})")
            for pk, person in sorted(people.items())
        ]
        self.fields["compare_with"].choices = self.fields["stakeholder"].choices


@admin.register(ConsoleTurn)
class ConsoleAdmin(admin.ModelAdmin):
    """The changelist of ConsoleTurn is the console itself: a form, the result, the history.

    Using it takes `registry.use_console` (mcp_admins, superusers): it sends a user's bearer.
    Each admin sees only their own turns; a superuser may open anyone's, and that is audited."""

    # The transcript is shown as the raw JSON-RPC view (change_form.html), not as a JSON field.
    exclude = ("transcript",)

    def _may_use(self, request) -> bool:
        return request.user.is_active and request.user.has_perm(console.USE_CONSOLE_PERMISSION)

    def has_module_permission(self, request):
        return self._may_use(request)

    def has_view_permission(self, request, obj=None):
        if not self._may_use(request):
            return False
        return obj is None or obj.user_id == request.user.pk or request.user.is_superuser

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        if not self._may_use(request):
            return False
        return obj is None or obj.user_id == request.user.pk

    def get_queryset(self, request):
        turns = super().get_queryset(request)
        return turns if request.user.is_superuser else turns.filter(user=request.user)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("delete/", view(self.delete_history_view), name="registry_console_delete"),
            path("<int:pk>/csv/", view(self.csv_view), name="registry_console_csv"),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        turn = self.get_object(request, object_id)
        if (
            turn is not None
            and turn.user_id != request.user.pk
            and self.has_view_permission(request, turn)
        ):
            console.console_turn_viewed(turn=turn, viewer=request.user)
        context = {**(extra_context or {}), "exchange_url": _exchange_url(request, turn)}
        return super().change_view(request, object_id, form_url, context)

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = ConsoleForm(request.POST or None)
        turn, comparison = None, None
        if request.method == "POST" and form.is_valid():
            if request.POST.get("action") == "compare":
                comparison = self._compare(request, form)
            else:
                turn = self._run(request, form)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("MCP 탐색 콘솔"),
            "form": form,
            "turn": turn,
            "comparison": comparison,
            "chart": answer_chart(turn.rendered) if turn is not None else None,
            "masked_columns": console.masked_labels(turn.rendered) if turn is not None else [],
            "exchange_url": _exchange_url(request, turn),
            "history": console.console_history(user=request.user)[:30],
            "retention_days": settings.CONSOLE_HISTORY_RETENTION_DAYS,
        }
        return TemplateResponse(request, "admin/registry/console.html", context)

    def _run(self, request, form):
        data = form.cleaned_data
        try:
            token = console.console_token(
                stakeholder_id=data["stakeholder"], one_time_bearer=data["one_time_bearer"]
            )
        except console.ConsoleError as exc:
            form.add_error(None, str(exc))
            return None
        discover = request.POST.get("action") == "discover"
        if not discover and not data["prompt"].strip():
            form.add_error("prompt", _("질문을 입력하세요."))
            return None
        return console.console_run(
            user=request.user,
            kind=ConsoleTurn.Kind.DISCOVER if discover else ConsoleTurn.Kind.CALL,
            server=data["server"],
            token=token,
            prompt="" if discover else data["prompt"],
            limit=data["limit"],
        )

    def _compare(self, request, form):
        data = form.cleaned_data
        if not data["prompt"].strip():
            form.add_error("prompt", _("질문을 입력하세요."))
            return None
        try:
            return console_compare(
                user=request.user,
                server=data["server"],
                stakeholder_ids=(data["stakeholder"], data["compare_with"]),
                prompt=data["prompt"],
                limit=data["limit"],
            )
        except console.ConsoleError as exc:
            form.add_error(None, str(exc))
            return None

    def csv_view(self, request, pk: int):
        """The turn's answer as CSV, as the console showed it (its owner, or a superuser)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        turn = self.get_queryset(request).filter(pk=pk, kind=ConsoleTurn.Kind.CALL).first()
        if turn is None or not (turn.rendered or {}).get("columns"):
            raise Http404
        response = HttpResponse(
            console_answer_download(turn=turn, user=request.user),
            content_type="text/csv; charset=utf-8",
        )
        response["Content-Disposition"] = f'attachment; filename="hyperbook-answer-{turn.pk}.csv"'
        response["Cache-Control"] = "no-store"
        return response

    def delete_history_view(self, request):
        if not self.has_delete_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            turn_id = request.POST.get("turn")
            deleted = console.console_history_delete(
                user=request.user, turn_id=int(turn_id) if turn_id and turn_id.isdigit() else None
            )
            messages.success(request, _("기록 %(n)s건을 삭제했습니다.") % {"n": deleted})
        return redirect(reverse("admin:registry_consoleturn_changelist"))


def _exchange_url(request, turn: ConsoleTurn | None) -> str:
    """The audit list of the turn's exchange, for those who may read the audit log."""
    if turn is None or not turn.exchange_id or not request.user.has_perm("audit.view_auditevent"):
        return ""
    query = urlencode({"exchange": turn.exchange_id})  # the audit list's ExchangeFilter
    return f"{reverse('admin:audit_auditevent_changelist')}?{query}"
