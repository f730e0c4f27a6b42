from django.apps import AppConfig
from django.db.models.signals import post_save
from django.utils.translation import gettext_lazy as _


class SigninConfig(AppConfig):
    name = "signin"
    verbose_name = _("에이전트 로그인 (OAuth)")

    def ready(self):
        from django.contrib import admin
        from django_otp.plugins.otp_totp.models import TOTPDevice
        from oauth2_provider.models import get_application_model

        from signin import checks  # noqa: F401  (registers the sign-in checks)
        from signin.clients import audit_client_first_seen
        from signin.forms import AdminLoginForm

        # The toolkit creates the rows of clients that arrive on their own (a metadata document's
        # first fetch, a dynamic registration); each is audited once, as its row is created.
        post_save.connect(
            audit_client_first_seen,
            sender=get_application_model(),
            dispatch_uid="signin.audit_client_first_seen",
        )
        # One login page for people: the admin's and /oauth/login/ share the template (and with
        # it the single sign-on button and whether a password form is offered at all).
        admin.site.login_template = "signin/login.html"
        # ... and the form: a password, and the authenticator app's code once one is added.
        admin.site.login_form = AdminLoginForm
        # Each staff account adds and removes its own app (/oauth/second-factor/, audited); an
        # operator removes a lost one with `manage.py totp_remove USERNAME`. django-otp's admin
        # page would let anyone who may edit it add a device with a secret of their choosing.
        if admin.site.is_registered(TOTPDevice):
            admin.site.unregister(TOTPDevice)
