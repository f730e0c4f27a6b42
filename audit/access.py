"""Who may do what in the admin, as audit events: every change of a user's or a group's rights."""

from django.contrib.auth.models import Group

from audit.models import AuditEvent
from audit.services import audit_change


def user_access_snapshot(user) -> dict | None:
    """The parts of a user that decide what they may do (never the password hash)."""
    if user is None or user.pk is None:
        return None
    return {
        "username": user.get_username(),
        "is_active": user.is_active,
        "is_staff": user.is_staff,
        "is_superuser": user.is_superuser,
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "permissions": _permission_names(user.user_permissions.all()),
    }


def group_access_snapshot(group: Group) -> dict | None:
    if group is None or group.pk is None:
        return None
    return {"name": group.name, "permissions": _permission_names(group.permissions.all())}


def access_change_record(*, kind: str, target: str, before: dict | None, after: dict | None, actor):
    """One event per real change ("auth.user_created", "auth.group_changed", …)."""
    if before == after:
        return None
    verb = "created" if before is None else "deleted" if after is None else "changed"
    return audit_change(
        action=AuditEvent.Action(f"auth.{kind}_{verb}"),
        actor=actor,
        target=target,
        before=before,
        after=after,
    )


def user_password_set_record(*, user, actor):
    """A password set in the admin, by its owner or by someone else: who, for whom, and whether
    the user may still log in with a password (never the password or its hash)."""
    return audit_change(
        action=AuditEvent.Action.USER_PASSWORD_SET,
        actor=actor,
        target=f"user:{user.get_username()}",
        before=None,
        after={"usable_password": user.has_usable_password()},
    )


def _permission_names(permissions) -> list[str]:
    return sorted(
        f"{app_label}.{codename}"
        for app_label, codename in permissions.values_list("content_type__app_label", "codename")
    )
