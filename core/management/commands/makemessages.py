"""Django's makemessages, reading only what users read: not the tests, benchmarks or documents.

`make messages` runs it (then compilemessages); the catalogue test extracts with it too, so both
find the same messages.
"""

from django.core.management.commands import makemessages

NOT_FOR_USERS = ["tests", "bench", "docs", "var", "node_modules", "test-artifacts"]


class Command(makemessages.Command):
    def handle(self, *args, **options):
        options["ignore_patterns"] = [*options.get("ignore_patterns", []), *NOT_FOR_USERS]
        # One line per file, not per line number: moving code does not rewrite the catalogue.
        options["add_location"] = options.get("add_location") or "file"
        return super().handle(*args, **options)
