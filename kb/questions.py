"""A question as the KB takes it: the prompt, how many rows, and the language to answer in.

Built once at the edge (the MCP tool's arguments, the console, a management command); the engine
takes it as given. It reads no database, so the tool can build it before any thread is entered.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from kb.catalogue import clamp_limit
from kb.selectai.question import main_language


@dataclass(frozen=True, slots=True)
class Question:
    """What is asked: the prompt, the most rows wanted (within kb.catalogue's limits) and the
    language the answer's own words are written in (the question's, whatever the server's)."""

    prompt: str
    limit: int
    language: str

    @classmethod
    def asked(cls, prompt: str, limit: int | None = None) -> Question:
        return cls(prompt=prompt, limit=clamp_limit(limit), language=prompt_language(prompt))


def prompt_language(prompt: object) -> str:
    """The question's main language ("ko" or "en"); LANGUAGE_CODE for no question."""
    if isinstance(prompt, str) and prompt.strip():
        return main_language(prompt)
    return settings.LANGUAGE_CODE
