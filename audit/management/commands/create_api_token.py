from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from audit.api_tokens import api_token_issue


class Command(BaseCommand):
    help = (
        "Issue a REST API token for a user (e.g. an auditor account for SIEM pulls). "
        "The token is printed once and only its fingerprint is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--label", default="api")
        parser.add_argument("--days", type=int, default=90)

    def handle(self, *args, user, label, days, **options):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"no such user: {user}")
        if not 1 <= days <= 365:
            raise CommandError("--days must be from 1 to 365")
        _, token = api_token_issue(
            user=account,
            label=label,
            expires_at=timezone.now() + timedelta(days=days),
            actor=None,  # an operator at this server's terminal: recorded as "system"
        )
        self.stdout.write(token)
