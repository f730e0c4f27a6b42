from django.contrib import admin

from core.models import ApiToken


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows rows that only services write (loaded data, audit events): no add, change or delete."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("display_prefix", "user", "label", "expires_at", "revoked_at")
    readonly_fields = ("display_prefix", "fingerprint", "created_at")
    fields = ("user", "label", "display_prefix", "fingerprint", "expires_at", "revoked_at")

    def has_add_permission(self, request):
        # Tokens are issued with `manage.py create_api_token`, which shows the token once.
        return False
