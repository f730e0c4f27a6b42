"""One login per active demo stakeholder (username = the stakeholder id in lower case), linked to
it, with its password in var/demo_logins.json (0600). Logins whose recorded password still works
are kept, so running it again changes nothing."""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from kb.models import Stakeholder
from registry.presets import PresetFileError, read_token_presets, write_token_presets
from signin.models import StakeholderLogin


class Command(BaseCommand):
    help = "Create a demo login per active stakeholder and write their passwords (mode 0600)."

    def add_arguments(self, parser):
        parser.add_argument("--output", default=str(settings.VAR_DIR / "demo_logins.json"))

    def handle(self, *args, output, **options):
        path = Path(output)
        try:
            passwords = read_token_presets(path) if path.exists() else {}
        except PresetFileError as exc:
            self.stderr.write(f"{exc}; setting new demo passwords")
            passwords = {}
        User = get_user_model()
        created = 0
        for stakeholder in Stakeholder.objects.filter(status=Stakeholder.Status.ACTIVE).order_by(
            "stakeholder_id"
        ):
            username = stakeholder.stakeholder_id.lower()
            with transaction.atomic():
                user, _ = User.objects.get_or_create(username=username)
                known = passwords.get(username)
                if not (known and user.check_password(known)):
                    passwords[username] = secrets.token_urlsafe(12)
                    user.set_password(passwords[username])
                    user.save()
                    created += 1
                StakeholderLogin.objects.filter(stakeholder=stakeholder).exclude(user=user).delete()
                StakeholderLogin.objects.update_or_create(
                    user=user, defaults={"stakeholder": stakeholder}
                )
        write_token_presets(path, passwords)
        self.stdout.write(
            f"demo logins: {created} new passwords, {len(passwords) - created} kept; "
            f"passwords in {path} (owner-only)"
        )
