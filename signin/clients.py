"""What hyperbook tells about the OAuth clients (agents) that sign in: which agent a login page is
for, what a client that tries to register itself is told when registration is off, and the audit
event of a client first seen through its Client ID Metadata Document (or registered itself)."""

import logging
from urllib.parse import parse_qs, urlsplit

from django.db import transaction
from django.urls import reverse
from oauth2_provider.models import get_application_model

from audit.models import AuditEvent
from audit.services import audit_change

logger = logging.getLogger(__name__)


def requesting_agent(next_url: str) -> dict | None:
    """The agent whose authorization request a login page will continue (`next_url`, already
    checked to be our own), as the consent page will name it: {"name", "client_id",
    "unverified"}; None when the login is not for an authorization request.

    A client known only by its metadata document's URL may not have been fetched yet (the
    document is read once the user is logged in): its URL's host is named until then."""
    parts = urlsplit(next_url or "")
    if parts.path != reverse("oauth2_provider:authorize"):
        return None
    client_id = (parse_qs(parts.query).get("client_id") or [""])[0].strip()
    if not client_id or len(client_id) > 255:
        return None
    Application = get_application_model()
    application = Application.objects.filter(client_id=client_id).first()
    if application is not None:
        return {
            "name": application.name or client_id,
            "client_id": client_id,
            "unverified": application.registration_source != Application.RegistrationSource.MANUAL,
        }
    host = urlsplit(client_id).hostname if client_id.startswith("https://") else None
    return {"name": host or client_id, "client_id": client_id, "unverified": True}


# RFC 7591 §3.2.2: the error body of a refused registration. Its description is ASCII English
# (the RFC's rule for error_description), and says what to do instead: the MCP SDKs try to
# register when they hold no client, and show this text to their user.
REGISTRATION_CLOSED = {
    "error": "invalid_client_metadata",
    "error_description": (
        "Dynamic client registration is off on this server (OAUTH_DCR_ENABLED is not set). "
        "Use a client registered in advance: an operator runs `manage.py create_oauth_client "
        "--name NAME --redirect-uri URI` (or uses the admin's OAuth clients page) and gives you "
        "its client_id; or sign in with a Client ID Metadata Document URL as the client_id."
    ),
}


def _snapshot(application) -> dict:
    return {
        "name": application.name,
        "client_id": application.client_id,
        "redirect_uris": application.redirect_uris.split(),
        "registration_source": application.registration_source,
    }


def audit_client_first_seen(sender, instance, created: bool, **kwargs) -> None:
    """post_save of the OAuth client model: a client that arrived on its own (its metadata
    document fetched at its first sign-in, or a dynamic registration) is audited once, when its
    row is created; a refetch of its document updates the row and records nothing. Clients
    registered by an operator are audited where they are registered.

    The row and its event stand or fall together: if the event cannot be written, the row is
    removed again and the error goes on (the toolkit then treats the client as unknown), so no
    client signs anyone in unaudited."""
    if not created or instance.registration_source == sender.RegistrationSource.MANUAL:
        return
    try:
        with transaction.atomic():
            audit_change(
                action=AuditEvent.Action.OAUTH_CLIENT_CREATED,
                actor=None,
                target=f"oauth_client:{instance.pk}",
                before=None,
                after=_snapshot(instance),
            )
    except Exception:
        logger.exception("audit of new OAuth client %s failed; removing it", instance.client_id)
        sender.objects.filter(pk=instance.pk).delete()
        raise
