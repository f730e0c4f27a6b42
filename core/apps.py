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
