"""The admin of who may do what: users, groups and API tokens, every change an audit event."""

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from audit.access import (
    access_change_record,
    group_access_snapshot,
    user_access_snapshot,
    user_password_set_record,
)
from audit.api_tokens import api_token_revoke
from core.admin import ReadOnlyAdmin
from core.models import ApiToken

User = get_user_model()


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """API tokens are issued with `manage.py create_api_token` (shown once), belong to their user
    for good, and end by revocation: moving a token to another user would silently give that
    user the first one's rights."""

    list_display = ("display_prefix", "user", "label", "expires_at", "revoked_at")
    list_select_related = ("user",)
    readonly_fields = (
        "user",
        "label",
        "display_prefix",
        "fingerprint",
        "created_at",
        "expires_at",
        "revoked_at",
    )
    fields = readonly_fields
    actions = ["revoke"]

    def has_revoke_permission(self, request):
        return request.user.has_perm("core.change_apitoken")

    @admin.action(description=_("선택한 API 토큰 폐기"), permissions=["revoke"])
    def revoke(self, request, queryset):
        revoked = sum(
            api_token_revoke(token=token, actor=request.user)
            for token in queryset.select_related("user")
        )
        self.message_user(
            request, _("API 토큰 %(n)s개를 폐기했습니다.") % {"n": revoked}, messages.SUCCESS
        )


class _AccessAuditing:
    """Records the before and after of who may do what, in the admin's own transaction."""

    kind = ""

    @staticmethod
    def snapshot(obj, /) -> dict | None:  # each admin below names its own
        return None

    def get_form(self, request, obj=None, change=False, **kwargs):
        # ModelAdmin.get_form's signature; `change` goes on by name, as UserAdmin's takes no more.
        form = super().get_form(request, obj, change=change, **kwargs)
        # The state before this request's change: kept on the request, not on the shared admin.
        request._access_before = self.snapshot(obj) if obj is not None else None
        return form

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        access_change_record(
            kind=self.kind,
            target=self.target(form.instance),
            before=getattr(request, "_access_before", None),
            after=self.snapshot(form.instance),
            actor=request.user,
        )

    def delete_model(self, request, obj):
        before, target = self.snapshot(obj), self.target(obj)
        super().delete_model(request, obj)
        access_change_record(
            kind=self.kind, target=target, before=before, after=None, actor=request.user
        )

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class AuditedUserAdmin(_AccessAuditing, UserAdmin):
    snapshot = staticmethod(user_access_snapshot)
    kind = "user"

    def user_change_password(self, request, id, form_url=""):
        # Django's view saves the password outside any transaction of ours: the event is
        # written with it, or neither is.
        with transaction.atomic():
            response = super().user_change_password(request, id, form_url)
            if request.method == "POST" and response.status_code == 302:
                user = self.get_object(request, unquote(id))
                user_password_set_record(user=user, actor=request.user)
        return response

    @staticmethod
    def target(user) -> str:
        return f"user:{user.get_username()}"


@admin.register(Group)
class AuditedGroupAdmin(_AccessAuditing, GroupAdmin):
    snapshot = staticmethod(group_access_snapshot)
    kind = "group"

    @staticmethod
    def target(group) -> str:
        return f"group:{group.name}"
