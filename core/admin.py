"""Admin base classes the apps share."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows rows that only services write (loaded data, audit events): no add, change or delete."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
