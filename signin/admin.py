from django.contrib import admin

from signin.models import StakeholderLogin


@admin.register(StakeholderLogin)
class StakeholderLoginAdmin(admin.ModelAdmin):
    """Which login acts as which stakeholder when it signs an agent in."""

    list_display = ("user", "stakeholder", "created_at")
    search_fields = ("user__username", "stakeholder__stakeholder_id", "stakeholder__name")
    autocomplete_fields = ("user",)
    raw_id_fields = ("stakeholder",)
