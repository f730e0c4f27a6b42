"""Remove a staff account's authenticator app (a lost or replaced phone): its local login asks
for no code until it adds another, as LOGIN_REQUIRE_TOTP then makes it do. Audited."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from signin.second_factor import totp_device_remove


class Command(BaseCommand):
    help = "Remove USERNAME's authenticator app (TOTP), so that it can log in and add another."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username, **options):
        User = get_user_model()
        user = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no account named {username!r}")
        if not totp_device_remove(user=user, actor=None):
            raise CommandError(f"{username} has no authenticator app")
        self.stdout.write(f"removed {username}'s authenticator app")
