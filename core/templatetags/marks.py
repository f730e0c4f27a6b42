"""Yes/no and masked marks drawn as images, not emoji: the fonts the project installs have no
emoji, and a missing glyph shows as an empty box."""

from django import template
from django.templatetags.static import static
from django.utils.html import format_html
from django.utils.translation import gettext as _

register = template.Library()


@register.simple_tag
def mark(ok):
    """The admin's own check or cross, with its meaning in words for screen readers."""
    icon, words = ("icon-yes.svg", _("정상")) if ok else ("icon-no.svg", _("문제 있음"))
    return format_html(
        '<img src="{}" alt="{}" title="{}" class="mark">', static(f"admin/img/{icon}"), words, words
    )


@register.simple_tag
def lock_mark():
    """A padlock for a masked column."""
    words = _("마스킹됨")
    return format_html(
        '<svg class="lock-mark" viewBox="0 0 16 16" width="12" height="12" role="img" '
        'aria-label="{}"><title>{}</title>'
        '<path d="M4 7V5a4 4 0 0 1 8 0v2h1v8H3V7h1zm2 0h4V5a2 2 0 0 0-4 0v2z"/></svg>',
        words,
        words,
    )
