"""The console's Compare: one question asked as two stakeholders, each answer a turn of the
asker's history with its own audited exchange, shown side by side so the policy's effect (rows,
masked columns) is visible at a glance."""

from dataclasses import dataclass

from django.utils.translation import gettext as _

from registry.console import ConsoleError, console_run, console_token, masked_labels
from registry.models import ConsoleTurn, McpServer


@dataclass(frozen=True)
class ComparedSide:
    """One stakeholder's answer as Compare shows it: how many rows, and which columns masked."""

    turn: ConsoleTurn

    @property
    def row_count(self) -> int:
        """The rows the answer holds (at most the asked limit; `truncated` says more existed)."""
        if self.turn.row_count is not None:
            return self.turn.row_count
        return len((self.turn.rendered or {}).get("rows") or [])

    @property
    def truncated(self) -> bool:
        return bool((self.turn.rendered or {}).get("truncated"))

    @property
    def masked_columns(self) -> list[str]:
        """The labels of the columns this stakeholder sees masked, in the answer's order."""
        return masked_labels(self.turn.rendered)


@dataclass(frozen=True)
class Comparison:
    left: ConsoleTurn
    right: ConsoleTurn

    @property
    def sides(self) -> list[ComparedSide]:
        return [ComparedSide(self.left), ComparedSide(self.right)]

    @property
    def only_left(self) -> list[str]:
        """Columns the left answer shows that the right one masks or leaves out."""
        return _masked_or_missing(self.left, self.right)

    @property
    def only_right(self) -> list[str]:
        return _masked_or_missing(self.right, self.left)


def console_compare(
    *, user, server: McpServer, stakeholder_ids: tuple[str, str], prompt: str, limit: int = 50
) -> Comparison:
    left_id, right_id = stakeholder_ids
    if not left_id or not right_id:
        raise ConsoleError(_("비교할 두 관계자를 고르세요."), code="compare_needs_two")
    if left_id == right_id:
        raise ConsoleError(_("서로 다른 두 관계자를 고르세요."), code="compare_needs_two")
    # Both tokens are checked before either question is sent.
    tokens = [console_token(stakeholder_id=sid) for sid in (left_id, right_id)]
    left, right = (
        console_run(
            user=user,
            kind=ConsoleTurn.Kind.CALL,
            server=server,
            token=token,
            prompt=prompt,
            limit=limit,
        )
        for token in tokens
    )
    return Comparison(left, right)


def _masked_or_missing(shown: ConsoleTurn, other: ConsoleTurn) -> list[str]:
    def visible(turn):
        return {
            column["label"] or column["name"]
            for column in (turn.rendered or {}).get("columns") or []
            if not column.get("masked")
        }

    return sorted(visible(shown) - visible(other))
