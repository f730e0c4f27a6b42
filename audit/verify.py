"""Checks an audit export without trusting our database:
`python -m audit.verify FILE --public-key KEY`.

Standard library, `cryptography` and audit.chain only, so whoever receives an export can run it
without Django. The file is the JSON Lines export of `manage.py export_audit --format jsonl`:
a header, the events in sequence order, then the signed checkpoints. Only the signed notes and the
events' hashes are trusted; every other field a reader might go by (the header's source, origin,
range and count, a checkpoint line's number, key id, source and time) must agree with them, and a
line with a key twice is refused. Two passes keep memory bounded whatever the file's size: the
first reads the checkpoints, the second streams the events keeping one hash.
"""

import argparse
import base64
import dataclasses
import datetime as dt
import itertools
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TypeGuard

from audit import merkle
from audit.chain import GENESIS_HASH, HASHED_FIELDS, OPTIONAL_HASHED_FIELDS, event_hash
from audit.signed_note import (
    Checkpoint,
    CosignatureVerifier,
    NoteError,
    Verifier,
    cosignatures_by,
    open_note,
    parse_checkpoint,
    signers_in_range,
    split_note,
)

EXPORT_TYPE = "hyperbook.audit_export"
EXPORT_VERSION = 1
EVENT_TYPE = "audit_event"
CHECKPOINT_TYPE = "audit_checkpoint"
BUNDLE_TYPE = "hyperbook.audit_proof"  # `export_audit --prove`: chosen events, each proven alone
BUNDLE_VERSION = 1
PROOF_TYPE = "audit_event_proof"
# Far above any event the application writes; it bounds what one line may cost us.
MAX_LINE_BYTES = 64 * 1024 * 1024

EVENT_KEYS = frozenset(("type", "hash", *HASHED_FIELDS, *OPTIONAL_HASHED_FIELDS))
_REQUIRED_KEYS = frozenset(("hash", *HASHED_FIELDS))
_HEX_HASH = re.compile(r"[0-9a-f]{64}")
# Events and checkpoints are stamped by different processes, perhaps on different hosts: a
# checkpoint's time may seem earlier than the event it signs, or the previous checkpoint, by this.
CLOCK_SKEW = dt.timedelta(minutes=5)


class Unverifiable(Exception):
    """The file or a key cannot be used at all, so nothing was verified (exit status 2)."""


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
            return _printable(f"ok: {self.message}")
        return _printable(f"FAILED at #{self.first_bad_sequence}: {self.message}")


def load_verifiers(specs: list[str]) -> list[Verifier]:
    """Verifier keys from `--public-key` values: a key (`name+keyid+base64`), or `@path` to a file
    of keys, one a line, blank lines and `#` comments skipped. Raises Unverifiable."""
    verifiers = []
    for number, spec in enumerate(specs, 1):
        if spec.startswith("@"):
            path = spec[1:]
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise Unverifiable(f"cannot read the key file {path}: {_reason(error)}") from None
            found = 0
            for line_number, line in enumerate(text.splitlines(), 1):
                line = line.strip()
                if line and not line.startswith("#"):
                    verifiers.append(_verifier(line, f"{path} line {line_number}"))
                    found += 1
            if not found:
                raise Unverifiable(f"the key file {path} holds no key")
        else:
            # Never echo the value: a private key given here by mistake must not reach a log.
            verifiers.append(_verifier(spec, f"--public-key #{number}"))
    if not verifiers:
        raise Unverifiable("no public key given")
    return verifiers


def load_witnesses(specs: list[str]) -> list[CosignatureVerifier]:
    witnesses = []
    for number, spec in enumerate(specs, 1):
        try:
            witnesses.append(CosignatureVerifier.from_text(spec))
        except (NoteError, ValueError) as error:
            raise Unverifiable(f"--witness-key #{number} is not a witness key: {error}") from None
    return witnesses


def _verifier(text: str, where: str) -> Verifier:
    try:
        return Verifier.from_text(text)
    except (NoteError, ValueError) as error:
        raise Unverifiable(f"{where} is not a verifier key: {error}") from None


def verify_export(
    path: str | Path,
    verifiers: list[Verifier],
    origin: str | None = None,
    witnesses: list[CosignatureVerifier] | None = None,
    quorum: int = 1,
) -> VerifyReport:
    """Verify the export (or proof bundle) at `path` against `verifiers`, stopping at the first
    problem; with `witnesses`, also say which of its checkpoints `quorum` of them cosigned. Raises
    Unverifiable if the file cannot be read or is not an export at all."""
    if not verifiers:
        raise Unverifiable("no public key given")
    try:
        with open(path, "rb") as file:
            if _is_bundle(file):
                report, notes = _verify_bundle(file, verifiers, origin)
            else:
                run = _Run(verifiers, origin)
                run.read_header_and_checkpoints(file)
                file.seek(0)
                report = run.verify_events(file)
                notes = [(str(e.number), e.note) for e in run.entries if e.checkpoint and e.note]
    except OSError as error:
        raise Unverifiable(f"cannot read {path}: {_reason(error)}") from None
    if report.ok and witnesses:
        summary = witness_summary(notes, witnesses, quorum)
        report = dataclasses.replace(report, message=f"{report.message}; {summary}")
    return report


def witness_summary(
    notes: list[tuple[str, str]], witnesses: list[CosignatureVerifier], quorum: int
) -> str:
    """Which checkpoints (labelled, in order) `quorum` of `witnesses` cosigned, in one phrase."""
    met: list[str] = []
    short: list[str] = []
    for label, note in dict(notes).items():
        try:
            cosigned = len(cosignatures_by(note, witnesses))
        except NoteError:
            cosigned = 0
        (met if cosigned >= quorum else short).append(label)
    return (
        f"witnessed (quorum {quorum} of {len(witnesses)}): "
        f"{', '.join(met) or 'none'}; not witnessed: {', '.join(short) or 'none'}"
    )


def _is_bundle(file: BinaryIO) -> bool:
    first = file.readline(MAX_LINE_BYTES)
    file.seek(0)
    try:
        header = _loads(first)
    except _BadLine:
        return False
    return isinstance(header, dict) and header.get("type") == BUNDLE_TYPE


def _verify_bundle(
    file: BinaryIO, verifiers: list[Verifier], origin: str | None
) -> tuple[VerifyReport, list[tuple[str, str]]]:
    """A proof bundle (`export_audit --prove`): each event on its own. Its hash recomputes, its
    inclusion proof leads from that hash (leaf sequence - 1) to a root, and the root is that of a
    checkpoint signed by a trusted key, at the proof's tree size, for the bundle's origin."""
    proven = 0
    keys: dict[str, None] = {}  # `name+keyid`, in the order first seen
    checkpoints: dict[str, int] = {}  # note -> its size
    lines = _lines(file)
    _, raw = next(lines)
    # _is_bundle read this line as the header: only one past MAX_LINE_BYTES reads here as None.
    header = _loads(raw) if raw is not None else None
    if not isinstance(header, dict):
        raise Unverifiable("not a proof bundle: its first line is not the header")
    if header.get("version") != BUNDLE_VERSION:
        raise Unverifiable(f"proof bundle version {header.get('version')!r} is not supported")
    origin = origin or header.get("origin")
    for number, raw in lines:
        try:
            record = _loads(raw) if raw is not None else None
        except _BadLine as error:
            return _bundle_failure(proven, f"line {number} is not valid JSON: {error}"), []
        problem, sequence = _bundle_proof_problem(record, verifiers, origin, keys, checkpoints)
        if problem:
            return _bundle_failure(proven, f"line {number}: {problem}", sequence), []
        proven += 1
    if not proven:
        return _bundle_failure(0, "the bundle proves no event"), []
    report = VerifyReport(
        True,
        proven,
        len(checkpoints),
        f"{proven} event{'' if proven == 1 else 's'} proven in the signed log "
        f"({len(checkpoints)} checkpoints; signed by {', '.join(keys)})",
        origin=origin,
        keys=tuple(keys),
    )
    return report, [(f"the one at size {size}", note) for note, size in checkpoints.items()]


def _bundle_proof_problem(
    record: object,
    verifiers: list[Verifier],
    origin: str | None,
    keys: dict[str, None],
    checkpoints: dict[str, int],
) -> tuple[str | None, int | None]:
    if not isinstance(record, dict) or record.get("type") != PROOF_TYPE:
        return "not an event's proof", None
    event = record.get("event")
    if not isinstance(event, dict) or _shape_problem(event):
        return "its event is malformed", None
    sequence = event["sequence"]
    try:
        computed = event_hash(event)
    except (TypeError, ValueError):
        computed = None
    if computed != event["hash"]:
        return f"event #{sequence} was altered: its hash does not recompute", sequence
    index, size = record.get("leaf_index"), record.get("tree_size")
    if index != sequence - 1 or not _is_count(size) or size < sequence:
        return f"event #{sequence}'s proof is for another leaf or tree size", sequence
    proof, note = _proof_hashes(record.get("hashes")), record.get("checkpoint")
    if proof is None or not isinstance(note, str):
        return f"event #{sequence}'s proof or checkpoint is malformed", sequence
    try:
        checkpoint = parse_checkpoint(open_note(note, verifiers))
        signers = signers_in_range(note, checkpoint.size, verifiers)
    except ValueError as error:
        return f"event #{sequence}'s checkpoint does not verify: {error}", sequence
    if checkpoint.size != size:
        return f"event #{sequence}'s checkpoint is of size {checkpoint.size}, not {size}", sequence
    if origin is not None and checkpoint.origin != origin:
        return f"event #{sequence}'s checkpoint is for origin {checkpoint.origin!r}", sequence
    leaf = merkle.leaf_hash(bytes.fromhex(event["hash"]))
    if not merkle.verify_inclusion(index, size, leaf, proof, bytes.fromhex(checkpoint.root_hash)):
        return f"event #{sequence}'s proof does not lead to its checkpoint's root", sequence
    for verifier in signers:
        keys[f"{verifier.name}+{verifier.key_id:08x}"] = None
    checkpoints[note] = checkpoint.size
    return None, sequence


def _bundle_failure(proven: int, message: str, sequence: int | None = None) -> VerifyReport:
    return VerifyReport(False, proven, 0, message, first_bad_sequence=sequence)


class _Failed(Exception):
    def __init__(self, sequence: int, message: str):
        super().__init__(message)
        self.sequence = sequence
        self.message = message


class _BadLine(Exception):
    pass


@dataclass
class _Entry:
    """One checkpoint line, opened (or not) in the first pass."""

    label: str
    size: int | None  # where it stands in the chain: its signed size, or where it claims to be
    checkpoint: Checkpoint | None = None
    problem: str | None = None
    keys: tuple[Verifier, ...] = ()
    number: int | None = None
    created_at: dt.datetime | None = None
    # The chain's hash at its size that it vouches for: its signed root (signed before the tree
    # existed), or the last leaf of the tree its signed root is over, as `head_proof` shows.
    head_hash: str | None = None
    over_tree: bool = False
    note: str | None = None

    @property
    def placed_size(self) -> int:
        """Its size, for an entry of _Run.entries: only one with a size is placed there."""
        assert self.size is not None
        return self.size


@dataclass
class _Run:
    verifiers: list[Verifier]
    origin: str | None  # what every checkpoint's origin must be, once known
    header: dict = field(default_factory=dict)
    entries: list[_Entry] = field(default_factory=list)  # by size
    unplaced: dict[int, _Entry] = field(default_factory=dict)  # by line, when no size is known
    events: int = 0
    checkpoints: int = 0
    first: int | None = None
    expected: int | None = None
    prev_hash: str | None = None
    next_entry: int = 0
    keys: dict[str, None] = field(default_factory=dict)
    last_checked: _Entry | None = None

    # First pass.

    def read_header_and_checkpoints(self, file: BinaryIO) -> None:
        ordinal = 0
        for number, raw in _lines(file):
            if number == 1:
                self._read_header(raw)
                continue
            # Only a line holding this word, or an escape that could spell it, can be a checkpoint.
            if raw is None or (b"audit_checkpoint" not in raw and b"\\u" not in raw):
                continue
            try:
                record = _loads(raw)
            except _BadLine:
                continue  # the second pass reports it where it stands
            if isinstance(record, dict) and record.get("type") == CHECKPOINT_TYPE:
                ordinal += 1
                entry = self._open(record, ordinal)
                if entry.size is None:
                    self.unplaced[number] = entry
                else:
                    self.entries.append(entry)
        if not self.header:
            raise Unverifiable("not a hyperbook audit export: the file is empty")
        if self.origin is None and isinstance(self.header.get("origin"), str):
            self.origin = self.header["origin"] or None
        self.entries.sort(key=lambda entry: entry.placed_size)

    def _read_header(self, raw: bytes | None) -> None:
        try:
            header = _loads(raw) if raw is not None else None
        except _BadLine:
            header = None
        if not isinstance(header, dict) or header.get("type") != EXPORT_TYPE:
            raise Unverifiable("not a hyperbook audit export: its first line is not the header")
        if header.get("version") != EXPORT_VERSION:
            raise Unverifiable(
                f"export version {header.get('version')!r} is not supported "
                f"(this verifier reads version {EXPORT_VERSION})"
            )
        self.header = header

    def _open(self, record: dict, ordinal: int) -> _Entry:
        number = record.get("number")
        label = f"checkpoint {number if _is_count(number) else ordinal}"
        note = record.get("note")
        if not isinstance(note, str):
            return _Entry(label, _claimed_size(record), problem=f"{label} has no signed note")
        try:
            text, _ = split_note(note)
            claimed = parse_checkpoint(text)
        except ValueError as error:  # NoteError, or int() refusing a Unicode digit it accepted
            return _Entry(
                label,
                _claimed_size(record),
                problem=f"{label} is not a signed checkpoint: {error}",
            )
        entry = _Entry(label, claimed.size, note=note)
        try:
            open_note(note, self.verifiers)
            entry.keys = signers_in_range(note, claimed.size, self.verifiers)
        except NoteError as error:
            entry.problem = f"{label}: {error}"
            return entry
        entry.checkpoint = claimed
        entry.problem = self._unsigned_field_problem(record, entry)
        return entry

    def _unsigned_field_problem(self, record: dict, entry: _Entry) -> str | None:
        """The line's other fields are conveniences; a reader may trust them, so they must agree
        with the note, its signatures and the header."""
        label, claimed = entry.label, entry.checkpoint
        assert claimed is not None  # _open sets it before asking
        if record.get("sequence") != claimed.size:
            return (
                f"{label}'s sequence field ({record.get('sequence')!r}) "
                f"is not its signed size (#{claimed.size})"
            )
        if record.get("hash") != claimed.root_hash:
            return f"{label}'s hash field is not its signed root hash"
        problem = self._head_problem(record, entry)
        if problem:
            return problem
        signed_by = {f"{verifier.key_id:08x}" for verifier in entry.keys}
        if record.get("key_id") not in signed_by:
            return f"{label}'s key_id field ({record.get('key_id')!r}) is not a key that signed it"
        if not _is_count(record.get("number")) or record["number"] < 1:
            return f"{label}'s number field ({record.get('number')!r}) is not a positive number"
        entry.number = record["number"]
        if record.get("source") != self.header.get("source"):
            return f"{label}'s source field ({record.get('source')!r}) is not the header's"
        entry.created_at = _moment(record.get("created_at"))
        if entry.created_at is None:
            return f"{label}'s created_at field ({record.get('created_at')!r}) is not a UTC time"
        return None

    def _head_problem(self, record: dict, entry: _Entry) -> str | None:
        label, claimed = entry.label, entry.checkpoint
        assert claimed is not None  # _open sets it before asking
        if "head_proof" not in record:  # the rule before the tree: the root is the chain's head
            entry.head_hash = claimed.root_hash
            return None
        head, proof = record.get("head_hash"), _proof_hashes(record.get("head_proof"))
        if not isinstance(head, str) or not _HEX_HASH.fullmatch(head) or proof is None:
            return f"{label}'s head_hash or head_proof field is malformed"
        leaf = merkle.leaf_hash(bytes.fromhex(head))
        root = bytes.fromhex(claimed.root_hash)
        if not merkle.verify_inclusion(claimed.size - 1, claimed.size, leaf, proof, root):
            return f"{label}'s head_proof does not lead from its head_hash to its signed root"
        entry.head_hash, entry.over_tree = head, True
        return None

    # Second pass.

    def verify_events(self, file: BinaryIO) -> VerifyReport:
        try:
            self._stream(file)
            self._finish()
        except _Failed as failure:
            return VerifyReport(
                False,
                self.events,
                self.checkpoints,
                failure.message,
                first_bad_sequence=failure.sequence,
                first_sequence=self.first,
                last_sequence=None if self.expected is None else self.expected - 1,
                origin=self.origin,
                keys=tuple(self.keys),
            )
        assert self.expected is not None  # _finish refuses an export without events
        last = self.expected - 1
        keys = ", ".join(self.keys)
        return VerifyReport(
            True,
            self.events,
            self.checkpoints,
            f"{self.events} events #{self.first}..#{last}, {self.checkpoints} checkpoints "
            f"verified (origin {self.origin}; keys {keys})",
            first_sequence=self.first,
            last_sequence=last,
            origin=self.origin,
            keys=tuple(self.keys),
        )

    def _here(self) -> int:
        """The sequence a problem found between events stands at: the next one expected."""
        if self.expected is not None:
            return self.expected
        first = self.header.get("first_sequence")  # only to place a problem before any event
        return first if _is_count(first) else 1

    def _stream(self, file: BinaryIO) -> None:
        records = self._records(file)
        for number, record in records:
            kind = record.get("type")
            if kind == EVENT_TYPE:
                self._event(number, record, records)
            elif kind == CHECKPOINT_TYPE:
                entry = self.unplaced.get(number)
                if entry is not None:
                    # An entry without a size is one _open could not read: it says why.
                    assert entry.problem is not None
                    raise _Failed(self._here(), entry.problem)
            elif kind == EXPORT_TYPE:
                raise _Failed(self._here(), f"line {number} is a second export header")
            else:
                raise _Failed(self._here(), f"line {number} has an unknown type {kind!r}")

    def _records(self, file: BinaryIO) -> Iterator[tuple[int, dict]]:
        for number, raw in _lines(file):
            if number == 1:
                continue
            if raw is None:
                raise _Failed(self._here(), f"line {number} is longer than {MAX_LINE_BYTES} bytes")
            try:
                record = _loads(raw)
            except _BadLine as error:
                if not raw.endswith(b"\n"):
                    raise _Failed(
                        self._here(),
                        f"the file is truncated: its last line (line {number}) is cut short",
                    ) from None
                raise _Failed(self._here(), f"line {number} is not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise _Failed(self._here(), f"line {number} is not a JSON object")
            yield number, record

    def _event(self, number: int, event: dict, records: Iterator[tuple[int, dict]]) -> None:
        sequence = event.get("sequence")
        if not _is_count(sequence) or sequence < 1:
            raise _Failed(self._here(), f"line {number}: an event without a valid sequence")
        if self.expected is None:
            self._start(sequence, event)
        else:
            if sequence != self.expected:
                self._out_of_place(sequence, records)
            self._check_shape(sequence, event)
            if event["prev_hash"] != self.prev_hash:
                raise _Failed(sequence, f"event #{sequence} does not link to #{sequence - 1}")
        try:
            computed = event_hash(event)
        except (TypeError, ValueError):  # a value the chain never hashes, such as a lone surrogate
            computed = None
        if computed != event["hash"]:
            raise _Failed(sequence, f"event #{sequence} was altered: its hash does not recompute")
        if event["source"] != self.header.get("source"):
            raise _Failed(
                sequence, f"event #{sequence} is of source {event['source']!r}, not the header's"
            )
        while self._entry_at(sequence):
            entry = self.entries[self.next_entry]
            self._check_entry(entry, sequence, event["hash"], _moment(event["occurred_at"]))
            self.next_entry += 1
        self.events += 1
        self.expected, self.prev_hash = sequence + 1, event["hash"]

    def _check_shape(self, sequence: int, event: dict) -> None:
        problem = _shape_problem(event)
        if problem:
            raise _Failed(sequence, f"event #{sequence} is malformed: {problem}")

    def _start(self, first: int, event: dict) -> None:
        """The first event: the checkpoints before it, then its anchor."""
        self.first = first
        anchors = []
        while (
            self.next_entry < len(self.entries)
            and self.entries[self.next_entry].placed_size < first
        ):
            entry = self.entries[self.next_entry]
            self._check_entry(entry, entry.placed_size, None)
            if entry.placed_size == first - 1:
                anchors.append(entry)
            self.next_entry += 1
        self._check_shape(first, event)
        if first == 1:
            if event["prev_hash"] != GENESIS_HASH:
                raise _Failed(1, "event #1 does not start the chain: its prev_hash is not genesis")
            return
        if not anchors:
            below = [e.placed_size for e in self.entries[: self.next_entry]]
            missing = max(below, default=0) + 1
            raise _Failed(
                missing,
                f"missing event #{missing}: the export starts at #{first} "
                f"and no signed checkpoint covers #{first - 1}",
            )
        for entry in anchors:
            if entry.head_hash != event["prev_hash"]:
                raise _Failed(first, f"event #{first} does not link to {entry.label}")

    def _out_of_place(self, sequence: int, records: Iterator[tuple[int, dict]]) -> None:
        expected = self.expected
        assert expected is not None  # asked only once an event set it
        if sequence < expected:
            raise _Failed(expected, f"event #{sequence} is out of order: #{expected} expected")
        try:
            following = next(records, (0, {}))[1]
        except _Failed:  # the next line is bad too: the first problem is still this one
            following = {}
        if following.get("type") == EVENT_TYPE and following.get("sequence") == expected:
            raise _Failed(expected, f"event #{expected} is out of order: #{sequence} comes first")
        raise _Failed(expected, f"missing event #{expected} (found #{sequence} in its place)")

    def _entry_at(self, sequence: int) -> bool:
        return (
            self.next_entry < len(self.entries) and self.entries[self.next_entry].size == sequence
        )

    def _check_entry(
        self,
        entry: _Entry,
        at: int,
        chain_hash: str | None,
        signed_event_at: dt.datetime | None = None,
    ) -> None:
        if entry.problem:
            raise _Failed(at, entry.problem)
        previous, self.last_checked = self.last_checked, entry
        # Entries that reach here (this one, the one before) were opened whole: _open set these.
        assert entry.checkpoint is not None
        assert entry.number is not None and entry.created_at is not None
        if previous is not None:
            assert previous.number is not None and previous.created_at is not None
            if entry.number != previous.number + 1:
                raise _Failed(
                    at,
                    f"{entry.label}'s number field ({entry.number}) is not {previous.label}'s + 1 "
                    "(a checkpoint line is missing, unreadable or misnumbered)",
                )
            if entry.created_at < previous.created_at - CLOCK_SKEW:
                raise _Failed(at, f"{entry.label} claims to be created before {previous.label}")
        if signed_event_at is not None and entry.created_at < signed_event_at - CLOCK_SKEW:
            raise _Failed(at, f"{entry.label} claims to be created before event #{at} it signs")
        checkpoint = entry.checkpoint
        if self.origin is None:
            self.origin = checkpoint.origin
        elif checkpoint.origin != self.origin:
            raise _Failed(
                at, f"{entry.label} is for origin {checkpoint.origin!r}, not {self.origin!r}"
            )
        if previous is not None and previous.over_tree and not entry.over_tree:
            raise _Failed(
                at, f"{entry.label} signs the chain's head, but {previous.label} signs the tree"
            )
        if chain_hash is not None and entry.head_hash != chain_hash:
            raise _Failed(at, f"event #{at} does not match {entry.label}")
        self.checkpoints += 1
        for verifier in entry.keys:
            self.keys[f"{verifier.name}+{verifier.key_id:08x}"] = None

    def _finish(self) -> None:
        if self.expected is None:
            raise _Failed(self._here(), "the export holds no events")
        last = self.expected - 1
        beyond = self.entries[self.next_entry :]
        for entry in beyond:
            self._check_entry(entry, entry.placed_size, None)
        if beyond:
            raise _Failed(
                last + 1,
                f"the export is truncated: events from #{last + 1} on are missing "
                f"({beyond[0].label} covers #{beyond[0].size})",
            )
        covered = max((e.placed_size for e in self.entries), default=0)
        if covered < last:
            held = "" if self.entries else " (the file holds no checkpoint: was it cut short?)"
            raise _Failed(
                covered + 1,
                f"events from #{covered + 1} on are not covered by a signed checkpoint{held}",
            )
        self._check_header(last)

    def _check_header(self, last: int) -> None:
        """What the header says is what the file holds and its checkpoints sign."""
        # An event and a checkpoint were checked before (_finish): they set these.
        assert self.first is not None and self.origin is not None
        header = self.header
        claimed_last = header.get("last_sequence")
        if claimed_last != last:
            if _is_count(claimed_last) and claimed_last > last:
                raise _Failed(
                    last + 1,
                    f"the export is truncated: its header claims events up to #{claimed_last}, "
                    f"the file ends at #{last}",
                )
            raise _Failed(last + 1, f"the header's last_sequence ({claimed_last!r}) is not #{last}")
        if header.get("first_sequence") != self.first:
            raise _Failed(
                self.first,
                f"the header's first_sequence ({header.get('first_sequence')!r}) "
                f"is not #{self.first}, the first event's",
            )
        if header.get("events") != self.events:
            raise _Failed(
                last + 1, f"the header's events ({header.get('events')!r}) is not {self.events}"
            )
        source = header.get("source")
        if header.get("origin") != self.origin or not (
            isinstance(source, str) and self.origin.endswith(f"/{source}")
        ):
            raise _Failed(
                last + 1,
                f"the header's origin and source ({header.get('origin')!r}, {source!r}) "
                f"are not the signed origin {self.origin!r}",
            )


def _lines(file: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
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


def _reject_constant(name: str) -> None:
    # NaN and Infinity are not JSON; orjson would hash them as null, the value they could replace.
    raise ValueError(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    # With a key twice, json keeps the last value while a reader (or grep) may go by the first.
    record = {}
    for key, value in pairs:
        if key in record:
            raise ValueError(f"the key {key!r} appears twice")
        record[key] = value
    return record


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def _loads(raw: bytes) -> object:
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise _BadLine(str(error).split(":")[0]) from None


def _shape_problem(event: dict) -> str | None:
    """Why the event is not as exports write it: only what its hash covers, in the types hashed.
    Values the hash would read the same in another type (an id, a latency, a falsy request id)
    must have the exported type, so that what is shown is what was hashed."""
    if not EVENT_KEYS.issuperset(event):
        unknown = sorted(set(event) - EVENT_KEYS)
        return f"its hash does not cover {', '.join(map(repr, unknown))}"
    if not _REQUIRED_KEYS.issubset(event):
        return f"it lacks {', '.join(n for n in (*HASHED_FIELDS, 'hash') if n not in event)}"
    for name in ("hash", "prev_hash"):
        if not isinstance(event[name], str) or not _HEX_HASH.fullmatch(event[name]):
            return f"its {name} is not 64 lowercase hex digits"
    for name in ("id", "occurred_at"):
        if not isinstance(event[name], str):
            return f"its {name} is not a string"
    latency = event["latency_ms"]
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int | float)):
        return "its latency_ms is not a number"
    for name in OPTIONAL_HASHED_FIELDS:
        if event.get(name) is not None and not isinstance(event[name], str):
            return f"its {name} is not a string"
    return None


def _moment(value: object) -> dt.datetime | None:
    """A UTC time as exports write it (2026-06-30T12:00:00.123456Z), or None."""
    if not isinstance(value, str) or not value.endswith("Z"):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.utcoffset() == dt.timedelta(0) else None


def _claimed_size(record: dict) -> int | None:
    sequence = record.get("sequence")
    return sequence if _is_count(sequence) else None


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _printable(text: str) -> str:
    # Names and origins come from the file: keep its control characters off the terminal.
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _proof_hashes(value: object) -> list[bytes] | None:
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


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or str(error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m audit.verify",
        description="Verify a hyperbook audit export (JSON Lines) against signed checkpoints.",
    )
    parser.add_argument("file", help="the export, from manage.py export_audit --format jsonl")
    parser.add_argument(
        "--public-key",
        action="append",
        required=True,
        metavar="KEY",
        help=(
            "a verifier key (name+keyid+base64, with @SIZE for a retired key: the last "
            "checkpoint size it signed) or @FILE of keys; repeat for rotated keys"
        ),
    )
    parser.add_argument("--origin", help="the origin every checkpoint must name")
    parser.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a witness's cosignature/v1 key (name+keyid+base64); repeat for each witness",
    )
    parser.add_argument(
        "--quorum", type=int, default=1, help="cosignatures that make a checkpoint witnessed"
    )
    args = parser.parse_args(argv)
    try:
        report = verify_export(
            args.file,
            load_verifiers(args.public_key),
            origin=args.origin,
            witnesses=load_witnesses(args.witness_key),
            quorum=max(args.quorum, 1),
        )
    except Unverifiable as error:
        print(_printable(f"error: {error}"), file=sys.stderr)
        return 2
    except Exception as error:  # a bug of ours: say so in one line, never pass a bad file
        print(
            _printable(f"error: could not verify: {type(error).__name__}: {error}"), file=sys.stderr
        )
        return 2
    print(report.line(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
