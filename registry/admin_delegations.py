"""Admin for token delegations: issue (token shown once), register, revoke. Never a raw token."""

from datetime import timedelta

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from kb.access import record_visibility, stakeholder_access
from kb.models import Stakeholder
from registry.agent_setup import agent_setups, mcp_url_for
from registry.delegations import (
    DelegationError,
    delegation_issue,
    delegation_register,
    delegation_revoke,
)
from registry.forms import (
    DelegationBulkRevokeForm,
    DelegationRegisterForm,
    DelegationRenewForm,
    DelegationRevokeForm,
    DelegationTermsForm,
)
from registry.issued_tokens import issued_page_path, token_hand_over, token_take_over
from registry.models import ACTIVE, EXPIRED, REVOKED, WRONG_AUDIENCE, TokenDelegation
from registry.renewal import delegation_renew, delegations_revoke
from registry.selectors import stakeholder_delegated_tools

EXPLAIN_ACCESS_PERMISSION = "registry.explain_access"
EXPIRING_SOON = timedelta(days=7)
EXPIRING = "expiring"  # a filter of the list, not a state: active, and ending within EXPIRING_SOON

# What registry.models.delegation_state() says of a delegation, as its admin shows it.
DELEGATION_STATE_LABELS = {
    ACTIVE: _("유효"),
    EXPIRED: _("만료"),
    REVOKED: _("폐기"),
    WRONG_AUDIENCE: _("다른 리소스용"),
}


class DelegationStateFilter(admin.SimpleListFilter):
    title = _("상태")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [
            *DELEGATION_STATE_LABELS.items(),
            (EXPIRING, _("7일 안에 만료")),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == EXPIRING:
            return queryset.in_state(ACTIVE, now=now).filter(expires_at__lte=now + EXPIRING_SOON)
        if self.value() in DELEGATION_STATE_LABELS:
            return queryset.in_state(self.value(), now=now)
        return queryset


@admin.register(TokenDelegation)
class TokenDelegationAdmin(admin.ModelAdmin):
    list_display = (
        "display_prefix",
        "stakeholder",
        "agent_name",
        "state_label",
        "expires_at",
        "last_used_at",
        "created_by",
    )
    list_filter = (DelegationStateFilter, "stakeholder", "source")
    search_fields = ("agent_name", "stakeholder__stakeholder_id")
    list_select_related = ("stakeholder", "created_by")
    readonly_fields = (
        "display_prefix",
        "fingerprint",
        "source",
        "stakeholder",
        "agent_name",
        "tools",
        "audience",
        "expires_at",
        "created_by",
        "created_at",
        "last_used_at",
        "revoked_at",
        "revoked_reason",
        "revoked_by",
        "renews",
    )
    fields = readonly_fields
    actions = ["revoke_selected"]
    change_form_template = "admin/registry/tokendelegation/change_form.html"
    change_list_template = "admin/registry/tokendelegation/change_list.html"

    @admin.display(description=_("상태"))
    def state_label(self, obj):
        return DELEGATION_STATE_LABELS[obj.state(now=timezone.now())]

    def has_change_permission(self, request, obj=None):
        # Delegations are immutable: revoke one and issue another instead.
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("register/", view(self.register_view), name="registry_tokendelegation_register"),
            path(
                "<int:pk>/issued/", view(self.issued_view), name="registry_tokendelegation_issued"
            ),
            path(
                "<int:pk>/revoke/", view(self.revoke_view), name="registry_tokendelegation_revoke"
            ),
            path("<int:pk>/renew/", view(self.renew_view), name="registry_tokendelegation_renew"),
            path(
                "access/<str:stakeholder_id>/",
                view(self.access_view),
                name="registry_stakeholder_access",
            ),
            *super().get_urls(),
        ]

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = DelegationTermsForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                delegation, token = delegation_issue(
                    created_by=request.user, **_terms(form.cleaned_data)
                )
            except DelegationError as exc:
                form.add_error(None, str(exc))
            else:
                # Post/Redirect/Get: a reload or a back-navigation re-requests the page that
                # shows the token, never the POST that issued it.
                response = HttpResponseRedirect(issued_page_path(delegation), status=303)
                token_hand_over(
                    response=response, request=request, delegation=delegation, token=token
                )
                return response
        return self._render(
            request,
            "admin/registry/tokendelegation/terms_form.html",
            {"form": form, "title": _("새 VPD 토큰 발급")},
        )

    def issued_view(self, request, pk: int):
        """The new token, shown once to whoever issued it; afterwards the page says it is gone."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        delegation = get_object_or_404(TokenDelegation, pk=pk, created_by=request.user)
        response = TemplateResponse(request, "admin/registry/tokendelegation/issued.html", {})
        token = token_take_over(request=request, response=response, delegation=delegation)
        context: dict[str, object] = {
            "delegation": delegation,
            "token": token,
            "title": _("토큰 발급됨") if token else _("토큰은 이미 표시되었습니다"),
        }
        if token:
            mcp_url = mcp_url_for(request)
            context.update(
                mcp_url=mcp_url,
                setups=agent_setups(
                    url=mcp_url, token=token, stakeholder_id=delegation.stakeholder_id
                ),
            )
        else:
            response.status_code = 410
        response.context_data = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            **context,
        }
        # admin_view adds never_cache; no-store keeps the page out of every cache, so a
        # back-navigation asks the server again, which no longer has the token to show.
        response["Cache-Control"] = "no-store"
        return response

    def register_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = DelegationRegisterForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            raw_token = data.pop("token")
            try:
                delegation = delegation_register(
                    raw_token=raw_token, created_by=request.user, **_terms(data)
                )
            except DelegationError as exc:
                # The form has checked the terms already: what is left is about the token.
                form.add_error("token", str(exc))
            else:
                messages.success(
                    request, _("토큰 지문을 등록했습니다. 토큰 원문은 저장하지 않습니다.")
                )
                return redirect(
                    reverse("admin:registry_tokendelegation_change", args=[delegation.pk])
                )
            finally:
                del raw_token
        return self._render(
            request,
            "admin/registry/tokendelegation/terms_form.html",
            {"form": form, "title": _("외부 발급 토큰 등록")},
        )

    def revoke_view(self, request, pk: int):
        if not request.user.has_perm("registry.add_tokendelegation"):
            raise PermissionDenied
        delegation = get_object_or_404(TokenDelegation, pk=pk)
        form = DelegationRevokeForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                delegation_revoke(
                    delegation=delegation,
                    reason=form.cleaned_data["reason"],
                    revoked_by=request.user,
                )
            except DelegationError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, _("위임을 폐기했습니다."))
                return redirect(reverse("admin:registry_tokendelegation_change", args=[pk]))
        return self._render(
            request,
            "admin/registry/tokendelegation/revoke.html",
            {
                "form": form,
                "delegation": delegation,
                "title": pgettext_lazy("page title", "위임 폐기"),
            },
        )

    def renew_view(self, request, pk: int):
        """A successor with the same stakeholder, tools and agent; its token is shown once."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        delegation = get_object_or_404(TokenDelegation, pk=pk)
        form = DelegationRenewForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                successor, token = delegation_renew(
                    delegation=delegation,
                    expires_at=form.cleaned_data["expires_at"],
                    revoke_now=form.cleaned_data["revoke_now"],
                    renewed_by=request.user,
                )
            except DelegationError as exc:
                form.add_error(None, str(exc))
            else:
                response = HttpResponseRedirect(issued_page_path(successor), status=303)
                token_hand_over(
                    response=response, request=request, delegation=successor, token=token
                )
                return response
        return self._render(
            request,
            "admin/registry/tokendelegation/renew.html",
            {
                "form": form,
                "delegation": delegation,
                "title": _("위임 갱신: %(delegation)s") % {"delegation": delegation},
            },
        )

    @admin.action(description=_("선택한 위임 폐기 (사유 입력)"), permissions=["add"])
    def revoke_selected(self, request, queryset):
        """Asks for one reason, then revokes every selected delegation with it."""
        form = DelegationBulkRevokeForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            try:
                revoked = delegations_revoke(
                    delegations=list(queryset),
                    reason=form.cleaned_data["reason"],
                    revoked_by=request.user,
                )
            except DelegationError as exc:
                form.add_error("reason", str(exc))
            else:
                self.message_user(
                    request,
                    _("위임 %(n)s개를 폐기했습니다.") % {"n": revoked},
                    messages.SUCCESS,
                )
                return None
        return self._render(
            request,
            "admin/registry/tokendelegation/revoke_selected.html",
            {
                "form": form,
                "delegations": list(queryset.select_related("stakeholder")),
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
                "title": _("선택한 위임 폐기"),
            },
        )

    def access_view(self, request, stakeholder_id: str):
        """Why this stakeholder sees what it sees ("why can't I see it?"), from the policy."""
        if not request.user.has_perm(EXPLAIN_ACCESS_PERMISSION):
            raise PermissionDenied
        stakeholder = get_object_or_404(
            Stakeholder.objects.select_related("branch"), pk=stakeholder_id
        )
        record_id = request.GET.get("record", "").strip()
        return self._render(
            request,
            "admin/registry/tokendelegation/access.html",
            {
                "access": stakeholder_access(stakeholder=stakeholder),
                "delegated": stakeholder_delegated_tools(stakeholder_id=stakeholder.pk),
                "record_id": record_id,
                "visibility": (
                    record_visibility(
                        stakeholder=stakeholder,
                        record_id=record_id,
                        name_the_customer=request.user.has_perm("kb.view_customer"),
                    )
                    if record_id
                    else None
                ),
                "title": _("접근 범위: %(stakeholder)s") % {"stakeholder": stakeholder},
            },
        )

    def _render(self, request, template, context):
        return TemplateResponse(
            request,
            template,
            {**self.admin_site.each_context(request), "opts": self.model._meta, **context},
        )


def _terms(data: dict) -> dict:
    return {
        "stakeholder": data["stakeholder"],
        "agent_name": data["agent_name"],
        "tools": data["tools"],
        "expires_at": data["expires_at"],
    }
