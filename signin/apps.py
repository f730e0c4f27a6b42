from django.apps import AppConfig
from django.db.models.signals import post_save
from django.utils.translation import gettext_lazy as _


class SigninConfig(AppConfig):
    name = "signin"
    verbose_name = _("에이전트 로그인 (OAuth)")

    def ready(self):
        from oauth2_provider.models import get_application_model

        from signin.clients import audit_client_first_seen

        # The toolkit creates the rows of clients that arrive on their own (a metadata document's
        # first fetch, a dynamic registration); each is audited once, as its row is created.
        post_save.connect(
            audit_client_first_seen,
            sender=get_application_model(),
            dispatch_uid="signin.audit_client_first_seen",
        )
