from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpServerConfig(AppConfig):
    name = "mcpserver"
    verbose_name = _("MCP 서버")
