"""The two operator groups and what each may do, brought in step with the models on migrate.

The groups are the product's: migrate sets their permissions to exactly these. Operators who
want other combinations make groups of their own.
"""

from django.contrib.auth.models import Group, Permission

MCP_ADMINS = "mcp_admins"
AUDITORS = "auditors"

# app label -> actions, per group. Models added later inherit their app's row.
GROUP_PERMISSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    MCP_ADMINS: {
        "registry": ("view", "add", "change", "delete"),
        "kb": ("view",),
        "audit": ("view",),
        "signin": ("view", "add", "change", "delete"),
        "oauth2_provider": ("view", "add", "change", "delete"),
    },
    AUDITORS: {
        "registry": ("view",),
        "audit": ("view",),
        "signin": ("view",),
        "oauth2_provider": ("view",),
    },
}
# Rights that are not implied by view/add/change/delete. Using the console sends a user's bearer
# and approving a pin decides what a server may offer: mcp_admins (and superusers) only. What a
# stakeholder may see and why (counts and rules, never a row's contents) is for auditors too.
GROUP_EXTRA_PERMISSIONS = {
    MCP_ADMINS: ("registry.use_console", "registry.approve_toolpin", "registry.explain_access"),
    AUDITORS: ("registry.explain_access",),
}


def ensure_default_groups() -> None:
    for group_name, per_app in GROUP_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        wanted = []
        for app_label, actions in per_app.items():
            for permission in Permission.objects.filter(content_type__app_label=app_label):
                if permission.codename.split("_", 1)[0] in actions:
                    wanted.append(permission)
        for name in GROUP_EXTRA_PERMISSIONS[group_name]:
            app_label, codename = name.split(".", 1)
            wanted.extend(
                Permission.objects.filter(content_type__app_label=app_label, codename=codename)
            )
        group.permissions.set(wanted)
