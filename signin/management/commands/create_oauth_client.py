"""Pre-register an OAuth client (an agent that cannot publish a metadata document)."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from oauth2_provider.models import get_application_model

from audit.models import AuditEvent
from audit.services import audit_change
from signin.cimd import checked_redirect_uri


class Command(BaseCommand):
    help = "Register a public OAuth client and print its client_id as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--redirect-uri", action="append", required=True, dest="redirect_uris")

    def handle(self, *args, name, redirect_uris, **options):
        name = name.strip()
        if not name or len(name) > 255:
            raise CommandError("--name must be 1 to 255 characters")
        for uri in redirect_uris:
            problem = checked_redirect_uri(uri)
            if problem:
                raise CommandError(f"--redirect-uri {problem}")
        Application = get_application_model()
        with transaction.atomic():
            client = Application.objects.create(
                name=name,
                client_type=Application.CLIENT_PUBLIC,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                redirect_uris=" ".join(redirect_uris),
                skip_authorization=False,
            )
            audit_change(
                action=AuditEvent.Action.OAUTH_CLIENT_CREATED,
                actor=None,
                target=f"oauth_client:{client.pk}",
                before=None,
                after={"name": name, "client_id": client.client_id, "redirect_uris": redirect_uris},
            )
        self.stdout.write(json.dumps({"client_id": client.client_id}))
