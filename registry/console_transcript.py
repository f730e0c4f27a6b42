"""The raw JSON-RPC view of a console exchange: each message as sent and received, kept bounded
and without any secret, for the turn's page and history."""

import json

from core.redaction import TooDeeplyNested, redact_secrets

# An exchange is a handful of messages (initialize, initialized, tools/list, tools/call and their
# answers); a server paging its tool list may add more. Past these, the view says what it left out.
MAX_TRANSCRIPT_MESSAGES = 30
MAX_MESSAGE_CHARS = 8_000


def transcript_capped(entries: list[dict], *, known: tuple[str, ...] = ()) -> list[dict]:
    """The entries a transport recorded, as a turn keeps them: direction, method, HTTP status and
    the message as pretty-printed JSON, every known secret and secret shape redacted.

    A message longer than MAX_MESSAGE_CHARS is cut there and keeps its full length in
    `full_length`; past MAX_TRANSCRIPT_MESSAGES, one last entry counts the messages left out."""
    kept = [_kept(entry, known) for entry in entries[:MAX_TRANSCRIPT_MESSAGES]]
    if len(entries) > MAX_TRANSCRIPT_MESSAGES:
        kept.append({"direction": "omitted", "count": len(entries) - MAX_TRANSCRIPT_MESSAGES})
    return kept


def _kept(entry: dict, known: tuple[str, ...]) -> dict:
    kept: dict = {
        "direction": "sent" if entry.get("direction") == "sent" else "received",
        "method": redact_secrets(str(entry.get("method") or ""), known=known)[:64],
    }
    status = entry.get("http_status")
    if isinstance(status, int) and not isinstance(status, bool):
        kept["http_status"] = status
    if "message" in entry:
        try:
            message = redact_secrets(entry["message"], known=known)
        except TooDeeplyNested:
            message = "[nested too deeply]"
        # Redacted again as text: a secret split across keys and values is whole here.
        text = redact_secrets(
            json.dumps(message, ensure_ascii=False, indent=2, sort_keys=True), known=known
        )
        # A lone surrogate ("\ud800" in a server's JSON) is valid in a str, not in UTF-8: no
        # database would store the turn. It is kept as its escape.
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        if len(text) > MAX_MESSAGE_CHARS:
            kept["full_length"] = len(text)
            text = text[:MAX_MESSAGE_CHARS]
        kept["text"] = text
    return kept
