"""The two operator groups and what each may do, brought in step with the models on migrate."""

from django.contrib.auth.models import Group, Permission

MCP_ADMINS = "mcp_admins"
AUDITORS = "auditors"

# app label -> actions, per group. Models added later inherit their app's row.
GROUP_PERMISSIONS = {
    MCP_ADMINS: {
        "registry": ("view", "add", "change", "delete"),
        "kb": ("view",),
        "audit": ("view",),
    },
    AUDITORS: {
        "registry": ("view",),
        "audit": ("view",),
    },
}


def ensure_default_groups() -> None:
    for group_name, per_app in GROUP_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        wanted = []
        for app_label, actions in per_app.items():
            for permission in Permission.objects.filter(content_type__app_label=app_label):
                if permission.codename.split("_", 1)[0] in actions:
                    wanted.append(permission)
        group.permissions.add(*wanted)
