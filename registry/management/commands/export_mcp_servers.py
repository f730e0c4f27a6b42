import json

from django.core.management.base import BaseCommand

from registry.selectors import server_declarations_export


class Command(BaseCommand):
    help = "Print the registered MCP servers as a JSON file that import_mcp_servers accepts."

    def handle(self, *args, **options):
        payload = {"servers": server_declarations_export()}
        self.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2))
