from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SigninConfig(AppConfig):
    name = "signin"
    verbose_name = _("에이전트 로그인 (OAuth)")
