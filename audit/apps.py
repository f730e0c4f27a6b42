from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = _("감사 로그")

    def ready(self):
        from audit import services, tasks
        from audit.metrics import AuditStateCollector
        from core.metrics import scrape_collector_add

        services.after_append_committed = tasks.after_append

        checks.register(checkpoint_keys_check)
        checks.register(witnesses_check)
        scrape_collector_add(AuditStateCollector())


def checkpoint_keys_check(app_configs, **kwargs):
    """A signer key that cannot be read would stop checkpoints silently: say so at start-up."""
    from audit.checkpoints import verifiers_from_settings

    try:
        verifiers_from_settings()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="audit.E001")]
    return []


def witnesses_check(app_configs, **kwargs):
    """A witness that cannot be read would leave every checkpoint unwitnessed: say so now."""
    from audit.witnesses import configured_witnesses

    try:
        configured_witnesses()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="audit.E002")]
    return []
