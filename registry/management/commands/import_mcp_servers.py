import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from registry.services import servers_import


class Command(BaseCommand):
    help = "Import MCP server declarations from a JSON file (all or nothing; idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{file} is not valid JSON (line {exc.lineno}, column {exc.colno})"
            ) from None
        rows = data.get("servers") if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise CommandError(f'{file} must hold a list of servers or {{"servers": [...]}}')

        report = servers_import(rows=rows)
        if not report.ok:
            for error in report.errors:
                for field_error in error.errors:
                    self.stderr.write(f"{error.server_id}: {field_error}")
            raise CommandError(f"{len(report.errors)} invalid declaration(s); nothing was imported")
        self.stdout.write(
            f"created {len(report.created)}, updated {len(report.updated)}, "
            f"unchanged {len(report.unchanged)}"
        )
