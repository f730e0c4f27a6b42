from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from kb.models import Stakeholder
from registry.presets import PresetFileError, read_token_presets, write_token_presets
from registry.selectors import delegation_for_token_is_usable
from registry.services import delegation_issue


class Command(BaseCommand):
    help = (
        "Issue one demo delegation per stakeholder and write the token preset file (mode 0600). "
        "Presets that are still valid are kept, so running it again changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", default=str(settings.VPD_TOKEN_PRESETS_FILE))
        parser.add_argument("--days", type=int, default=settings.DELEGATION_DEFAULT_LIFETIME_DAYS)

    def handle(self, *args, output, days, **options):
        path = Path(output)
        try:
            presets = read_token_presets(path) if path.exists() else {}
        except PresetFileError as exc:
            self.stderr.write(f"{exc}; issuing new demo tokens")
            presets = {}
        expires_at = timezone.now() + timedelta(days=days)
        issued = []
        for stakeholder in Stakeholder.objects.order_by("stakeholder_id"):
            token = presets.get(stakeholder.stakeholder_id)
            if token and delegation_for_token_is_usable(token=token, stakeholder=stakeholder):
                continue
            _, presets[stakeholder.stakeholder_id] = delegation_issue(
                stakeholder=stakeholder, agent_name="demo preset", expires_at=expires_at
            )
            issued.append(stakeholder.stakeholder_id)
        write_token_presets(path, presets)
        self.stdout.write(
            f"demo delegations: {len(issued)} issued, {len(presets) - len(issued)} kept; "
            f"token presets in {path} (owner-only)"
        )
