"""Audit facts in the reader's language: refusal reasons by their names instead of their codes,
and the chain check's result in words."""

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from audit.models import AuditEvent


def reason_label(code: str) -> str:
    """A refusal reason's name; other text a detail may hold is shown as it is."""
    try:
        return str(AuditEvent.Reason(code).label)
    except ValueError:
        return code


def chain_words(check) -> str:
    """What a chain check found, for a ChainVerification (or a ChainReport)."""
    if getattr(check, "ok", None):
        events_checked = getattr(check, "events_checked", None)
        checked = events_checked if events_checked is not None else getattr(check, "checked", 0)
        return ngettext(
            "이벤트 %(n)s건을 확인했고 체인이 온전합니다.",
            "이벤트 %(n)s건을 확인했고 체인이 온전합니다.",
            checked,
        ) % {"n": f"{checked:,}"}
    # The problem names events and checkpoints by number; it is kept as the check wrote it.
    return _("체인에 문제가 있습니다: %(problem)s") % {"problem": check.message}
