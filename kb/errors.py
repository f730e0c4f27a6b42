"""What the KB says instead of an answer: one base, so the MCP tool maps every refusal in one place.

`message` is written for the asker (in the question's language); `reason` is machine-readable and
names the refusal in the audit.
"""

from __future__ import annotations


class KbError(Exception):
    """The KB did not answer; the message is safe to show the asker."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        return self.message
