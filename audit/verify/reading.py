"""Reading an export or a proof bundle strictly: each line one JSON object ending in LF alone, no
key twice, only the keys its writer (`audit.export`, `audit.proofs`) writes, and every value the
hash covers in the one form that hashes as it reads, so that what a reader sees is what is proven.
"""

import base64
import datetime as dt
import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import BinaryIO, TypeGuard

from audit import merkle
from audit.chain import HASHED_FIELDS, OPTIONAL_HASHED_FIELDS
from audit.signed_note import split_note

EXPORT_TYPE = "hyperbook.audit_export"
EXPORT_VERSION = 1
EVENT_TYPE = "audit_event"
CHECKPOINT_TYPE = "audit_checkpoint"
BUNDLE_TYPE = "hyperbook.audit_proof"  # `export_audit --prove`: chosen events, each proven alone
BUNDLE_VERSION = 1
PROOF_TYPE = "audit_event_proof"
# Far above any event the application writes; it bounds what one line may cost us.
MAX_LINE_BYTES = 64 * 1024 * 1024

# The keys each line holds as its writer writes it, and no other: a reader may go by any key.
HEADER_KEYS = frozenset(
    (
        *("type", "version", "source", "origin", "exported_at"),
        *("first_sequence", "last_sequence", "events"),
    )
)
BUNDLE_HEADER_KEYS = frozenset(("type", "version", "source", "origin"))
EVENT_KEYS = frozenset(("hash", *HASHED_FIELDS, *OPTIONAL_HASHED_FIELDS))  # a bundle's event
EXPORT_EVENT_KEYS = EVENT_KEYS | {"type"}  # an export's event line
CHECKPOINT_KEYS = frozenset(
    ("type", "number", "source", "sequence", "hash", "key_id", "created_at", "note")
)
TREE_KEYS = frozenset(("head_hash", "head_proof"))  # both, on a checkpoint signed over the tree
PROOF_KEYS = frozenset(("type", "event", "leaf_index", "tree_size", "hashes", "checkpoint"))

_REQUIRED_EVENT_KEYS = frozenset(("hash", *HASHED_FIELDS))
HEX_HASH = re.compile(r"[0-9a-f]{64}")


class BadLine(Exception):
    """A line that is not one JSON object written as exports write it; the message says why."""


def read_lines(file: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes), or None for a line longer than MAX_LINE_BYTES, which is skipped."""
    for number in itertools.count(1):
        raw = file.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            while raw and not raw.endswith(b"\n"):
                raw = file.readline(1 << 20)
            yield number, None
            continue
        yield number, raw


def read_record(number: int, raw: bytes | None) -> dict:
    """Line `number` as the JSON object it holds. Raises BadLine unless it is exactly one object
    and a line feed, as every line of an export is written."""
    if raw is None:
        raise BadLine(f"line {number} is longer than {MAX_LINE_BYTES} bytes")
    problem = line_end_problem(number, raw)
    if problem:
        raise BadLine(problem)
    record = decode(raw, number)
    if not isinstance(record, dict):
        raise BadLine(f"line {number} is not a JSON object")
    if not raw.startswith(b"{") or not raw.endswith(b"}\n"):
        raise BadLine(f"line {number} has blank space before or after its JSON object")
    return record


def line_end_problem(number: int, raw: bytes) -> str | None:
    if not raw.endswith(b"\n"):
        return f"the file is truncated: its last line (line {number}) is cut short"
    if b"\r" in raw:  # JSON strings cannot hold one raw: it is a CR LF line end, or stray space
        return f"line {number} holds a carriage return (CR LF line ends?): exports end lines in LF"
    return None


def decode(raw: bytes, number: int) -> object:
    """The line's JSON value, read strictly; raises BadLine."""
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise BadLine(f"line {number} is not valid JSON: {str(error).split(':')[0]}") from None


def _reject_constant(name: str) -> None:
    # NaN and Infinity are not JSON; orjson would hash them as null, the value they could replace.
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    # 1e400 reads as infinity, as 1e500 does: two texts, one value.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    # With a key twice, json keeps the last value while a reader (or grep) may go by the first.
    record = {}
    for key, value in pairs:
        if key in record:
            raise ValueError(f"the key {key!r} appears twice")
        record[key] = value
    return record


_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
)


def keys_problem(record: dict, allowed: frozenset[str], what: str) -> str | None:
    """Why `record` (`what` names it) holds a key its writer does not write, or None."""
    unknown = sorted(set(record) - allowed)
    if unknown:
        return f"{what} holds {', '.join(map(repr, unknown))}, which no export writes or signs"
    return None


def event_problem(event: dict, allowed: frozenset[str] = EVENT_KEYS) -> str | None:
    """Why the event is not as exports write it: only what its hash covers, in the types hashed.
    A value the hash would read the same in another type or form (an id, a latency, a falsy
    request id) must have its exported one, so that what is shown is what was hashed."""
    if not allowed.issuperset(event):
        unknown = sorted(set(event) - allowed)
        return f"its hash does not cover {', '.join(map(repr, unknown))}"
    if not _REQUIRED_EVENT_KEYS.issubset(event):
        return f"it lacks {', '.join(n for n in (*HASHED_FIELDS, 'hash') if n not in event)}"
    for name in ("hash", "prev_hash"):
        if not isinstance(event[name], str) or not HEX_HASH.fullmatch(event[name]):
            return f"its {name} is not 64 lowercase hex digits"
    for name in ("id", "occurred_at"):
        if not isinstance(event[name], str):
            return f"its {name} is not a string"
    problem = _latency_problem(event["latency_ms"])
    if problem:
        return problem
    for name in OPTIONAL_HASHED_FIELDS:  # hashed only when set: "" would read as null does
        value = event.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            return f"its {name} is not a non-empty string"
    return None


def _latency_problem(latency: object) -> str | None:
    """The hash covers a latency to three decimals (audit.chain), which every writer rounds it to:
    more digits than that would be digits nobody can prove."""
    if latency is None:
        return None
    if isinstance(latency, bool) or not isinstance(latency, int | float):
        return "its latency_ms is not a number"
    try:
        hashed = f"{float(latency):.3f}"
    except OverflowError:
        return "its latency_ms is out of range"
    if float(hashed) != latency:
        return f"its latency_ms has digits its hash does not cover (it hashes as {hashed})"
    return None


def duplicate_signer(note: str) -> str | None:
    """The first key (`name (key id)`) that signs `note` twice, or None. One key's second line
    proves nothing more, and a reader counting signatures would be misled (Go's note.Open refuses
    it too). Only call on a note split_note reads."""
    _, signatures = split_note(note)
    seen = set()
    for signature in signatures:
        key = (signature.name, signature.key_id)
        if key in seen:
            return f"{signature.name} (key {signature.key_id:08x})"
        seen.add(key)
    return None


def moment(value: object) -> dt.datetime | None:
    """A UTC time as exports write it (2026-06-30T12:00:00.123456Z), or None."""
    if not isinstance(value, str) or not value.endswith("Z"):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.utcoffset() == dt.timedelta(0) else None


def is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def proof_hashes(value: object) -> list[bytes] | None:
    """A proof's hashes, each base64 of 32 bytes, at most 64 of them; None when it is not one."""
    if not isinstance(value, list) or len(value) > 64:
        return None
    hashes = []
    for item in value:
        try:
            decoded = base64.b64decode(item, validate=True) if isinstance(item, str) else b""
        except ValueError:
            return None
        if len(decoded) != merkle.HASH_SIZE:
            return None
        hashes.append(decoded)
    return hashes
