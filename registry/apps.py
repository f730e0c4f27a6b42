from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = _("MCP 레지스트리")

    def ready(self):
        from django.contrib import admin

        # The admin index opens with the dashboard (registry/dashboard.py).
        admin.site.index_template = "admin/hyperbook_index.html"
