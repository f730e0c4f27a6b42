from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from kb.policy import reader_role
from kb.services import kb_reader_role_setup


class Command(BaseCommand):
    help = (
        "PostgreSQL: create or repair the KB reader role (settings.KB_DB_READER_ROLE; NOLOGIN, "
        "NOBYPASSRLS, SELECT on the KB tables) and let a login role SET ROLE to it. Run as a DBA."
    )

    def add_arguments(self, parser):
        parser.add_argument("--database", default="default")
        parser.add_argument(
            "--grant-to",
            default=None,
            help="login role that may switch to the reader role (default: the connected user)",
        )

    def handle(self, *args, database: str, grant_to: str | None, **options):
        if connections[database].vendor != "postgresql":
            self.stdout.write("not PostgreSQL: nothing to do (row policy is applied in queries)")
            return
        try:
            statements = kb_reader_role_setup(using=database, grant_to=grant_to)
        except (DatabaseError, ValueError) as exc:
            raise CommandError(f"could not set up the KB reader role: {exc}") from exc
        for statement in statements:
            self.stdout.write(statement.replace("\n", " ") + ";")
        self.stdout.write(f"KB reader role {reader_role()!r} is ready")
