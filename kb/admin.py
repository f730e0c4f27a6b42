"""Read-only admin for the KB's reference tables and VPD principals.

Customers, contracts and payments are not registered: the admin would read them without the VPD
policy (RRNs and phone numbers in full). They are read through kb.vpd only.
"""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin
from kb.models import Branch, Product, Stakeholder


@admin.register(Branch)
class BranchAdmin(ReadOnlyAdmin):
    list_display = ("branch_id", "branch_name", "region")
    search_fields = ("branch_id", "branch_name")


@admin.register(Product)
class ProductAdmin(ReadOnlyAdmin):
    list_display = ("product_code", "product_name", "category", "term_years")
    list_filter = ("category",)
    search_fields = ("product_code", "product_name")


@admin.register(Stakeholder)
class StakeholderAdmin(ReadOnlyAdmin):
    list_display = ("stakeholder_id", "name", "role", "branch", "status", "access_link")
    list_filter = ("role", "status", "branch")
    list_select_related = ("branch",)
    search_fields = ("stakeholder_id", "name")

    @admin.display(description=_("접근 범위"))
    def access_link(self, obj):
        # The explanation lives with the delegations (registry), which may read the KB's policy.
        url = reverse("admin:registry_stakeholder_access", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, _("설명 보기"))
