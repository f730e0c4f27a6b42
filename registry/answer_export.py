"""A console answer as CSV, exactly as the console showed it: the same columns and cells, masked
values still masked. Every download is an audit event."""

import csv
import io

from audit.models import AuditEvent
from audit.services import audit_record
from registry.models import ConsoleTurn

# A cell a spreadsheet would read as a formula (CSV injection): an answer, its column labels
# included, may come from any registered server, so such text is written with a leading
# apostrophe, which shows it as text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def answer_csv(rendered: dict) -> str:
    columns = rendered.get("columns") or []
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([_cell(column.get("label") or column.get("name", "")) for column in columns])
    for row in rendered.get("rows") or []:
        writer.writerow([_cell(value) for value in row])
    # A byte-order mark, so spreadsheet programs read the Korean as UTF-8.
    return "\ufeff" + out.getvalue()


def console_answer_download(*, turn: ConsoleTurn, user) -> str:
    """The turn's answer as CSV; recorded as who downloaded which turn, and how many rows."""
    text = answer_csv(turn.rendered or {})
    audit_record(
        action=AuditEvent.Action.CONSOLE_ANSWER_DOWNLOADED,
        outcome=AuditEvent.Outcome.ALLOWED,
        actor=user.get_username(),
        target=f"console_turn:{turn.pk}",
        stakeholder_id=turn.stakeholder_id,
        row_count=len((turn.rendered or {}).get("rows") or []),
        detail=f"owner:{turn.user_id}",
    )
    return text


def _cell(value) -> str:
    if value is None:
        return ""
    text = str(value)
    if isinstance(value, str) and text.startswith(_FORMULA_START):
        return "'" + text
    return text
