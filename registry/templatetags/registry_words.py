import json

from django import template

from registry.answer_format import cell_text
from registry.dashboard import dashboard_figures, dashboard_servers
from registry.pinning import pin_state_label

register = template.Library()
register.filter("pin_state_label", pin_state_label)


@register.filter
def formatted_cells(row, columns):
    """A row's cells as the console shows them, each formatted for its column."""
    names = [column.get("name", "") for column in columns or []]
    return [
        cell_text(value, column_name=names[i] if i < len(names) else "")
        for i, value in enumerate(row)
    ]


@register.inclusion_tag("admin/registry/_dashboard.html", takes_context=True)
def dashboard(context):
    user = context["request"].user
    return {
        "figures": dashboard_figures(user=user),
        "servers": dashboard_servers(user=user),
    }


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


@register.filter
def pair(left, right) -> list:
    return [left, right]
