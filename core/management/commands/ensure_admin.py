import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the admin login once: DJANGO_SUPERUSER_USERNAME/PASSWORD from the environment, "
        "otherwise user 'admin' with a generated password written to var/admin_password (0600)."
    )

    def handle(self, *args, **options):
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "").strip() or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
        users = get_user_model()
        if users.objects.filter(username=username).exists():
            self.stdout.write(f"admin login '{username}' already exists")
            return
        password_file = None
        if not password:
            password = secrets.token_urlsafe(18)
            password_file = settings.VAR_DIR / "admin_password"
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(password + "\n")
            os.chmod(password_file, 0o600)
        users.objects.create_superuser(username=username, email="", password=password)
        where = f"in {password_file}" if password_file else "from DJANGO_SUPERUSER_PASSWORD"
        self.stdout.write(f"created admin login '{username}'; its password is {where}")
