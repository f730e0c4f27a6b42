"""The operator's side of signing in: which login acts as which stakeholder, and the OAuth
clients registered in advance. Every change is an audit event."""

from django.contrib import admin
from django.db import models, transaction
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from audit.models import AuditEvent
from audit.services import audit_change
from signin.models import EnterpriseIdp, SsoIdentity, StakeholderLogin

Application = get_application_model()

# Tokens and codes are fingerprints here and belong to delegations (the delegations' admin and
# each user's agents page show and end them): the toolkit's own lists would only mislead.
for model in (
    get_access_token_model(),
    get_refresh_token_model(),
    get_grant_model(),
    get_id_token_model(),
    Application,
):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


class _Audited:
    action: AuditEvent.Action

    def snapshot(self, obj) -> dict:
        raise NotImplementedError

    def save_model(self, request, obj, form, change):
        before = self.snapshot(type(obj).objects.get(pk=obj.pk)) if change else None
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            audit_change(
                action=self.action,
                actor=request.user,
                target=self.target(obj),
                before=before,
                after=self.snapshot(obj),
            )

    def delete_model(self, request, obj):
        before, target = self.snapshot(obj), self.target(obj)
        with transaction.atomic():
            super().delete_model(request, obj)
            audit_change(
                action=self.action, actor=request.user, target=target, before=before, after=None
            )

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            self.delete_model(request, obj)


@admin.register(StakeholderLogin)
class StakeholderLoginAdmin(_Audited, admin.ModelAdmin):
    """Which login acts as which stakeholder when it signs an agent in."""

    action = AuditEvent.Action.STAKEHOLDER_LINK_CHANGED
    list_display = ("user", "stakeholder", "created_at")
    list_select_related = ("user", "stakeholder")
    search_fields = ("user__username", "stakeholder__stakeholder_id", "stakeholder__name")
    raw_id_fields = ("user", "stakeholder")

    def snapshot(self, obj) -> dict:
        return {"user": obj.user.get_username(), "stakeholder_id": obj.stakeholder_id}

    @staticmethod
    def target(obj) -> str:
        return f"user:{obj.user.get_username()}"


@admin.register(Application)
class OAuthClientAdmin(_Audited, admin.ModelAdmin):
    """Clients registered in advance (or seen through their metadata document, marked so): public
    clients, with their redirect URIs. No client skips the consent page: that choice is the
    user's, every time."""

    action = AuditEvent.Action.OAUTH_CLIENT_CHANGED
    list_display = ("name", "client_id", "client_type", "registration_source", "created")
    list_filter = ("registration_source", "client_type")
    search_fields = ("name", "client_id")
    fields = ("name", "client_id", "redirect_uris", "registration_source")
    readonly_fields = ("client_id", "registration_source")

    def save_model(self, request, obj, form, change):
        # Agents are public clients (PKCE, no secret to keep): the only kind registered here.
        obj.client_type = Application.CLIENT_PUBLIC
        obj.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
        super().save_model(request, obj, form, change)

    def snapshot(self, obj) -> dict:
        return {
            "name": obj.name,
            "client_id": obj.client_id,
            "client_type": obj.client_type,
            "redirect_uris": obj.redirect_uris.split(),
        }

    @staticmethod
    def target(obj) -> str:
        return f"oauth_client:{obj.pk}"


@admin.register(EnterpriseIdp)
class EnterpriseIdpAdmin(_Audited, admin.ModelAdmin):
    """Enterprise IdPs whose ID-JAGs the token endpoint accepts (SEP-990), and what each may grant:
    which clients, which tools. Its users act as the stakeholders their logins are linked to."""

    action = AuditEvent.Action.ENTERPRISE_IDP_CHANGED
    list_display = ("name", "issuer", "enabled", "created_at")
    list_filter = ("enabled",)
    search_fields = ("name", "issuer")
    # A JWKS URL is https (EnterpriseIdp.clean); a bare host typed here is taken as such.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def snapshot(self, obj) -> dict:
        # Public keys and names only: nothing here is a secret.
        return {
            "name": obj.name,
            "issuer": obj.issuer,
            "jwks_url": obj.jwks_url,
            "jwks_kids": [key.get("kid") for key in (obj.jwks or {}).get("keys", [])],
            "client_ids": obj.client_ids,
            "tools": obj.tools,
            "subject_claim": obj.subject_claim,
            "enabled": obj.enabled,
        }

    @staticmethod
    def target(obj) -> str:
        return f"enterprise_idp:{obj.pk}"


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Who signed in through the company's OpenID provider, as the provider names them. Read
    only: the provider's claims decide groups and links at each sign-in, and a person is kept out
    by deactivating their login (or at the provider), not by editing this."""

    list_display = ("user", "subject", "issuer", "created_at", "last_sign_in_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "created_at", "last_sign_in_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
