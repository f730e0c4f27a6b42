"""What a verification answers: one report, one line to print, and the two ways it stops."""

from dataclasses import dataclass


class Unverifiable(Exception):
    """The file, a key or an option cannot be used at all, so nothing was verified (exit 2)."""


class Failed(Exception):
    """The first problem found, at the sequence it makes untrustworthy (exit 1)."""

    def __init__(self, sequence: int | None, message: str):
        super().__init__(message)
        self.sequence = sequence
        self.message = message


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    events: int  # events verified (before the first problem, if any)
    checkpoints: int  # checkpoints verified
    message: str
    first_bad_sequence: int | None = None
    first_sequence: int | None = None
    last_sequence: int | None = None
    origin: str | None = None
    keys: tuple[str, ...] = ()  # `name+keyid` of each key that verified a checkpoint

    def line(self) -> str:
        """The one line the command prints."""
        if self.ok:
            return printable(f"ok: {self.message}")
        if self.first_bad_sequence is None:  # a problem no event stands at, e.g. a bundle's header
            return printable(f"FAILED: {self.message}")
        return printable(f"FAILED at #{self.first_bad_sequence}: {self.message}")


def printable(text: str) -> str:
    # Names and origins come from the file: keep its control characters off the terminal.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
