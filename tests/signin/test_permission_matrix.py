"""The sign-in pages and actions, tried as every kind of user: the table is the rule. An action is
done for real (Django's test client) and judged by its effect; a refused one leaves none."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from core.groups import AUDITORS, MCP_ADMINS, ensure_default_groups
from registry.models import TokenDelegation
from signin.models import SsoIdentity, StakeholderLogin
from tests.signin.conftest import authorize_params, consent_form, linked_user, new_pkce, sign_in

# Every action as every role, each in a fresh world: the full run holds it, not the quick loop.
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ROLES = ("anonymous", "owner", "other_user", "unlinked_staff", "mcp_admin", "auditor", "superuser")
MATRIX = {
    "agents.list_own_grant": {"owner", "mcp_admin", "auditor", "superuser"},
    "agents.revoke_own_grant": {"owner", "mcp_admin", "superuser"},
    "consent.approve": {"owner", "other_user"},  # a login linked to a stakeholder
    "admin.view_stakeholder_links": {"mcp_admin", "auditor", "superuser"},
    "admin.add_stakeholder_link": {"mcp_admin", "superuser"},
    "admin.view_sso_identities": {"mcp_admin", "auditor", "superuser"},
    "admin.delete_sso_identity": set(),  # read only: the provider decides
}


@pytest.fixture
def world(kb, client_app):
    ensure_default_groups()
    User = get_user_model()
    owner = linked_user("kb-p-001", "KB-P-001")
    users = {
        "owner": owner,
        "other_user": linked_user("kb-m-001", "KB-M-001"),
        "unlinked_staff": User.objects.create_user("staff", password="x", is_staff=True),
        "mcp_admin": User.objects.create_user("admin", password="x", is_staff=True),
        "auditor": User.objects.create_user("auditor", password="x", is_staff=True),
        "superuser": User.objects.create_superuser("root", password="x"),
    }
    users["mcp_admin"].groups.add(Group.objects.get(name=MCP_ADMINS))
    users["auditor"].groups.add(Group.objects.get(name=AUDITORS))
    SsoIdentity.objects.create(user=owner, issuer="https://login.corp.example", subject="sub-owner")
    _, answer = sign_in(Client(), client_app, owner)
    grant = TokenDelegation.objects.get(source=TokenDelegation.Source.SIGNED_IN)
    return {"users": users, "grant": grant, "app": client_app}


def as_role(world, role) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(world["users"][role])
    return client


def do(action, client, world) -> bool:
    grant = world["grant"]
    if action == "agents.list_own_grant":
        page = client.get("/oauth/agents/")
        return page.status_code == 200 and f'data-grant="{grant.pk}"'.encode() in page.content
    if action == "agents.revoke_own_grant":
        client.post(f"/oauth/agents/{grant.pk}/revoke/")
        grant.refresh_from_db()
        return grant.revoked_at is not None
    if action == "consent.approve":
        before = TokenDelegation.objects.count()
        page = client.get("/oauth/authorize/", authorize_params(world["app"], new_pkce()))
        if page.status_code != 200:
            return False
        client.post("/oauth/authorize/", consent_form(page) | {"allow": "true"})
        return TokenDelegation.objects.count() == before + 1
    if action == "admin.view_stakeholder_links":
        page = client.get("/admin/signin/stakeholderlogin/")
        return page.status_code == 200 and b"kb-p-001" in page.content
    if action == "admin.add_stakeholder_link":
        staff = world["users"]["unlinked_staff"]
        from kb.models import Stakeholder

        target = Stakeholder.objects.get(stakeholder_id="KB-H-001")
        client.post(
            "/admin/signin/stakeholderlogin/add/", {"user": staff.pk, "stakeholder": target.pk}
        )
        return StakeholderLogin.objects.filter(user=staff).exists()
    if action == "admin.view_sso_identities":
        page = client.get("/admin/signin/ssoidentity/")
        return page.status_code == 200 and b"sub-owner" in page.content
    if action == "admin.delete_sso_identity":
        identity = SsoIdentity.objects.get(subject="sub-owner")
        client.post(f"/admin/signin/ssoidentity/{identity.pk}/delete/", {"post": "yes"})
        return not SsoIdentity.objects.filter(pk=identity.pk).exists()
    raise AssertionError(action)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", sorted(MATRIX))
def test_every_sign_in_action_as_every_role(world, role, action):
    allowed = role in MATRIX[action]
    assert do(action, as_role(world, role), world) is allowed, (action, role)


def test_admin_changes_to_links_and_clients_are_audited(world):
    from audit.models import AuditEvent
    from kb.models import Stakeholder

    admin = as_role(world, "mcp_admin")
    staff = world["users"]["unlinked_staff"]
    target = Stakeholder.objects.get(stakeholder_id="KB-H-001")
    admin.post("/admin/signin/stakeholderlogin/add/", {"user": staff.pk, "stakeholder": target.pk})
    linked = AuditEvent.objects.get(action=AuditEvent.Action.STAKEHOLDER_LINK_CHANGED)
    assert linked.changes["after"] == {"user": "staff", "stakeholder_id": "KB-H-001"}

    response = admin.post(
        "/admin/oauth2_provider/application/add/",
        {"name": "Desk agent", "redirect_uris": "http://127.0.0.1/callback"},
    )
    assert response.status_code == 302, response.content[:1000]
    from oauth2_provider.models import get_application_model

    created = get_application_model().objects.get(name="Desk agent")
    assert created.client_type == "public"
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.OAUTH_CLIENT_CHANGED, target=f"oauth_client:{created.pk}"
    ).exists()
