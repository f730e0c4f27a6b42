from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_groups(sender, **kwargs):
    from core.groups import ensure_default_groups

    ensure_default_groups()


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "hyperbook"

    def ready(self):
        # Permissions exist only once post_migrate has created them; the groups follow them here.
        post_migrate.connect(_ensure_groups, dispatch_uid="core.ensure_default_groups")
        from django.contrib import admin
        from django.utils.translation import gettext_lazy as _

        from core import checks  # noqa: F401  (registers the system checks)

        # The admin is hyperbook's front door: its name, and a "view site" link that leads to the
        # audit overview (there is no other public site).
        admin.site.site_header = "hyperbook"
        admin.site.site_title = _("hyperbook 관리")
        admin.site.index_title = _("hyperbook 관리")
        admin.site.site_url = "/admin/audit/auditevent/overview/"
