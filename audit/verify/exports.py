"""Checking an export (`manage.py export_audit --format jsonl`): its header, its events in sequence
order, then its signed checkpoints. Two passes keep memory bounded whatever the file's size: the
first reads the header and the checkpoints, the second streams the events keeping one hash."""

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from audit import merkle
from audit.chain import GENESIS_HASH, event_hash
from audit.signed_note import (
    Checkpoint,
    NoteError,
    Verifier,
    open_note,
    parse_checkpoint,
    signers_in_range,
    split_note,
)
from audit.verify.reading import (
    CHECKPOINT_KEYS,
    CHECKPOINT_TYPE,
    EVENT_TYPE,
    EXPORT_EVENT_KEYS,
    EXPORT_TYPE,
    EXPORT_VERSION,
    HEADER_KEYS,
    HEX_HASH,
    TREE_KEYS,
    BadLine,
    decode,
    duplicate_signer,
    event_problem,
    is_count,
    keys_problem,
    moment,
    proof_hashes,
    read_lines,
    read_record,
)
from audit.verify.report import Failed, Unverifiable, VerifyReport

# Events and checkpoints are stamped by different processes, perhaps on different hosts: a
# checkpoint's time may seem earlier than the event it signs, or the previous checkpoint, by this.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass
class Entry:
    """One checkpoint line, opened (or not) in the first pass."""

    label: str
    size: int | None  # where it stands in the chain: its signed size, or where it claims to be
    line: int = 0
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
        """Its size, for an entry of ExportRun.entries: only one with a size is placed there."""
        assert self.size is not None
        return self.size


@dataclass
class ExportRun:
    verifiers: list[Verifier]
    origin: str | None  # what every checkpoint's origin must be, once known
    header: dict = field(default_factory=dict)
    header_problem: str | None = None
    entries: list[Entry] = field(default_factory=list)  # by size
    unplaced: dict[int, Entry] = field(default_factory=dict)  # by line, when no size is known
    events: int = 0
    checkpoints: int = 0
    first: int | None = None
    expected: int | None = None
    prev_hash: str | None = None
    next_entry: int = 0
    first_checkpoint_line: int | None = None
    last_in_file: Entry | None = None  # the last checkpoint line read whole, in file order
    keys: dict[str, None] = field(default_factory=dict)
    last_checked: Entry | None = None

    # First pass.

    def read_header_and_checkpoints(self, file: BinaryIO) -> None:
        ordinal = 0
        for number, raw in read_lines(file):
            if number == 1:
                self._read_header(raw)
                continue
            # Only a line holding this word, or an escape that could spell it, can be a checkpoint.
            if raw is None or (b"audit_checkpoint" not in raw and b"\\u" not in raw):
                continue
            record, problem = _checkpoint_candidate(number, raw)
            if record is not None and record.get("type") == CHECKPOINT_TYPE:
                ordinal += 1
                entry = self._open(record, ordinal)
                entry.line = number
                if problem or entry.problem:  # a problem with how it is written names its line
                    entry.problem = problem or f"line {number}: {entry.problem}"
                if entry.size is None:
                    self.unplaced[number] = entry
                else:
                    self._check_file_order(entry)
                    self.entries.append(entry)
        if not self.header:
            raise Unverifiable("not a hyperbook audit export: the file is empty")
        if self.origin is None and isinstance(self.header.get("origin"), str):
            self.origin = self.header["origin"] or None
        self.entries.sort(key=lambda entry: entry.placed_size)

    def _read_header(self, raw: bytes | None) -> None:
        try:
            header = decode(raw, 1) if raw is not None else None
        except BadLine as error:
            header, reason = None, f" ({error})"
        else:
            reason = ""
        if not isinstance(header, dict) or header.get("type") != EXPORT_TYPE:
            raise Unverifiable(
                f"not a hyperbook audit export: its first line is not the header{reason}"
            )
        if header.get("version") != EXPORT_VERSION:
            raise Unverifiable(
                f"export version {header.get('version')!r} is not supported "
                f"(this verifier reads version {EXPORT_VERSION})"
            )
        self.header = header
        assert raw is not None  # decode read it
        try:
            read_record(1, raw)
        except BadLine as error:
            self.header_problem = str(error)
            return
        self.header_problem = keys_problem(header, HEADER_KEYS, "line 1, the header,")
        if not self.header_problem and moment(header.get("exported_at")) is None:
            self.header_problem = (
                f"the header's exported_at ({header.get('exported_at')!r}) is not a UTC time"
            )

    def _check_file_order(self, entry: Entry) -> None:
        """An export writes its checkpoints in order; one out of order was moved. (One with a
        problem of its own is reported where it stands, and orders nothing.)"""
        if entry.problem:
            return
        previous = self.last_in_file
        if previous is not None and entry.placed_size <= previous.placed_size:
            entry.problem = (
                f"line {entry.line}: {entry.label} (#{entry.size}) comes after "
                f"{previous.label} (#{previous.size}): the checkpoints are out of order"
            )
            return
        self.last_in_file = entry

    def _open(self, record: dict, ordinal: int) -> Entry:
        number = record.get("number")
        label = f"checkpoint {number if is_count(number) else ordinal}"
        note = record.get("note")
        if not isinstance(note, str):
            return Entry(label, _claimed_size(record), problem=f"{label} has no signed note")
        try:
            text, _ = split_note(note)
            claimed = parse_checkpoint(text)
        except ValueError as error:  # NoteError, or int() refusing a Unicode digit it accepted
            return Entry(
                label, _claimed_size(record), problem=f"{label} is not a signed checkpoint: {error}"
            )
        entry = Entry(label, claimed.size, note=note)
        try:
            open_note(note, self.verifiers)
            entry.keys = signers_in_range(note, claimed.size, self.verifiers)
        except NoteError as error:
            entry.problem = f"{label}: {error}"
            return entry
        twice = duplicate_signer(note)
        if twice:
            entry.problem = f"{label}'s note holds two signatures by {twice}"
            return entry
        entry.checkpoint = claimed
        entry.problem = self._unsigned_field_problem(record, entry)
        return entry

    def _unsigned_field_problem(self, record: dict, entry: Entry) -> str | None:
        """The line's other fields are conveniences; a reader may trust them, so they must agree
        with the note, its signatures and the header, and there must be no other."""
        label, claimed = entry.label, entry.checkpoint
        assert claimed is not None  # _open sets it before asking
        problem = keys_problem(record, CHECKPOINT_KEYS | TREE_KEYS, f"{label}'s line")
        if problem:
            return problem
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
        if not is_count(record.get("number")) or record["number"] < 1:
            return f"{label}'s number field ({record.get('number')!r}) is not a positive number"
        entry.number = record["number"]
        if record.get("source") != self.header.get("source"):
            return f"{label}'s source field ({record.get('source')!r}) is not the header's"
        entry.created_at = moment(record.get("created_at"))
        if entry.created_at is None:
            return f"{label}'s created_at field ({record.get('created_at')!r}) is not a UTC time"
        return None

    def _head_problem(self, record: dict, entry: Entry) -> str | None:
        label, claimed = entry.label, entry.checkpoint
        assert claimed is not None  # _open sets it before asking
        held = TREE_KEYS & set(record)
        if not held:  # the rule before the tree: the root is the chain's head
            entry.head_hash = claimed.root_hash
            return None
        if held != TREE_KEYS:
            return f"{label}'s line holds {', '.join(map(repr, held))} without the other"
        head, proof = record.get("head_hash"), proof_hashes(record.get("head_proof"))
        if not isinstance(head, str) or not HEX_HASH.fullmatch(head) or proof is None:
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
        except Failed as failure:
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

    def unwitnessed_from(self, witnessed: set[str]) -> tuple[int, Entry] | None:
        """After a clean run: the first event no checkpoint whose note is in `witnessed` covers
        (the chain ties every event to each checkpoint after it), and the last checkpoint; or
        None when the last checkpoint is witnessed."""
        assert self.first is not None and self.expected is not None and self.entries
        through = max((e.placed_size for e in self.entries if e.note in witnessed), default=0)
        if through >= self.expected - 1:
            return None
        return max(through + 1, self.first), self.entries[-1]

    def _here(self) -> int:
        """The sequence a problem found between events stands at: the next one expected."""
        if self.expected is not None:
            return self.expected
        first = self.header.get("first_sequence")  # only to place a problem before any event
        return first if is_count(first) else 1

    def _stream(self, file: BinaryIO) -> None:
        if self.header_problem:
            raise Failed(self._here(), self.header_problem)
        records = self._records(file)
        for number, record in records:
            kind = record.get("type")
            if kind == EVENT_TYPE:
                if self.first_checkpoint_line is not None:
                    raise Failed(
                        self._here(),
                        f"line {number} is an event after the checkpoints (from line "
                        f"{self.first_checkpoint_line}): an export writes its events first",
                    )
                self._event(number, record, records)
            elif kind == CHECKPOINT_TYPE:
                self.first_checkpoint_line = self.first_checkpoint_line or number
                entry = self.unplaced.get(number)
                if entry is not None:
                    # An entry without a size is one _open could not read: it says why.
                    assert entry.problem is not None
                    raise Failed(self._here(), entry.problem)
            elif kind == EXPORT_TYPE:
                raise Failed(self._here(), f"line {number} is a second export header")
            else:
                raise Failed(self._here(), f"line {number} has an unknown type {kind!r}")

    def _records(self, file: BinaryIO) -> Iterator[tuple[int, dict]]:
        for number, raw in read_lines(file):
            if number == 1:
                continue
            try:
                record = read_record(number, raw)
            except BadLine as error:
                raise Failed(self._here(), str(error)) from None
            yield number, record

    def _event(self, number: int, event: dict, records: Iterator[tuple[int, dict]]) -> None:
        sequence = event.get("sequence")
        if not is_count(sequence) or sequence < 1:
            raise Failed(self._here(), f"line {number}: an event without a valid sequence")
        if self.expected is None:
            self._start(sequence, event)
        else:
            if sequence != self.expected:
                self._out_of_place(sequence, records)
            self._check_shape(sequence, event)
            if event["prev_hash"] != self.prev_hash:
                raise Failed(sequence, f"event #{sequence} does not link to #{sequence - 1}")
        try:
            computed = event_hash(event)
        except (TypeError, ValueError):  # a value the chain never hashes, such as a lone surrogate
            computed = None
        if computed != event["hash"]:
            raise Failed(sequence, f"event #{sequence} was altered: its hash does not recompute")
        if event["source"] != self.header.get("source"):
            raise Failed(
                sequence, f"event #{sequence} is of source {event['source']!r}, not the header's"
            )
        while self._entry_at(sequence):
            entry = self.entries[self.next_entry]
            self._check_entry(entry, sequence, event["hash"], moment(event["occurred_at"]))
            self.next_entry += 1
        self.events += 1
        self.expected, self.prev_hash = sequence + 1, event["hash"]

    def _check_shape(self, sequence: int, event: dict) -> None:
        problem = event_problem(event, EXPORT_EVENT_KEYS)
        if problem:
            raise Failed(sequence, f"event #{sequence} is malformed: {problem}")

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
                raise Failed(1, "event #1 does not start the chain: its prev_hash is not genesis")
            return
        if not anchors:
            below = [e.placed_size for e in self.entries[: self.next_entry]]
            missing = max(below, default=0) + 1
            raise Failed(
                missing,
                f"missing event #{missing}: the export starts at #{first} "
                f"and no signed checkpoint covers #{first - 1}",
            )
        for entry in anchors:
            if entry.head_hash != event["prev_hash"]:
                raise Failed(first, f"event #{first} does not link to {entry.label}")

    def _out_of_place(self, sequence: int, records: Iterator[tuple[int, dict]]) -> None:
        expected = self.expected
        assert expected is not None  # asked only once an event set it
        if sequence < expected:
            raise Failed(expected, f"event #{sequence} is out of order: #{expected} expected")
        try:
            following = next(records, (0, {}))[1]
        except Failed:  # the next line is bad too: the first problem is still this one
            following = {}
        if following.get("type") == EVENT_TYPE and following.get("sequence") == expected:
            raise Failed(expected, f"event #{expected} is out of order: #{sequence} comes first")
        raise Failed(expected, f"missing event #{expected} (found #{sequence} in its place)")

    def _entry_at(self, sequence: int) -> bool:
        return (
            self.next_entry < len(self.entries) and self.entries[self.next_entry].size == sequence
        )

    def _check_entry(
        self,
        entry: Entry,
        at: int,
        chain_hash: str | None,
        signed_event_at: dt.datetime | None = None,
    ) -> None:
        if entry.problem:
            raise Failed(at, entry.problem)
        previous, self.last_checked = self.last_checked, entry
        # Entries that reach here (this one, the one before) were opened whole: _open set these.
        assert entry.checkpoint is not None
        assert entry.number is not None and entry.created_at is not None
        if previous is not None:
            _check_succession(previous, entry, at)
        if signed_event_at is not None and entry.created_at < signed_event_at - CLOCK_SKEW:
            raise Failed(at, f"{entry.label} claims to be created before event #{at} it signs")
        checkpoint = entry.checkpoint
        if self.origin is None:
            self.origin = checkpoint.origin
        elif checkpoint.origin != self.origin:
            raise Failed(
                at, f"{entry.label} is for origin {checkpoint.origin!r}, not {self.origin!r}"
            )
        if chain_hash is not None and entry.head_hash != chain_hash:
            raise Failed(at, f"event #{at} does not match {entry.label}")
        self.checkpoints += 1
        for verifier in entry.keys:
            self.keys[f"{verifier.name}+{verifier.key_id:08x}"] = None

    def _finish(self) -> None:
        if self.expected is None:
            raise Failed(self._here(), "the export holds no events")
        last = self.expected - 1
        beyond = self.entries[self.next_entry :]
        for entry in beyond:
            self._check_entry(entry, entry.placed_size, None)
        if beyond:
            raise Failed(
                last + 1,
                f"the export is truncated: events from #{last + 1} on are missing "
                f"({beyond[0].label} covers #{beyond[0].size})",
            )
        covered = max((e.placed_size for e in self.entries), default=0)
        if covered < last:
            held = "" if self.entries else " (the file holds no checkpoint: was it cut short?)"
            raise Failed(
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
            if is_count(claimed_last) and claimed_last > last:
                raise Failed(
                    last + 1,
                    f"the export is truncated: its header claims events up to #{claimed_last}, "
                    f"the file ends at #{last}",
                )
            raise Failed(last + 1, f"the header's last_sequence ({claimed_last!r}) is not #{last}")
        if header.get("first_sequence") != self.first:
            raise Failed(
                self.first,
                f"the header's first_sequence ({header.get('first_sequence')!r}) "
                f"is not #{self.first}, the first event's",
            )
        if header.get("events") != self.events:
            raise Failed(
                last + 1, f"the header's events ({header.get('events')!r}) is not {self.events}"
            )
        source = header.get("source")
        if header.get("origin") != self.origin or not (
            isinstance(source, str) and self.origin.endswith(f"/{source}")
        ):
            raise Failed(
                last + 1,
                f"the header's origin and source ({header.get('origin')!r}, {source!r}) "
                f"are not the signed origin {self.origin!r}",
            )


def _check_succession(previous: Entry, entry: Entry, at: int) -> None:
    """`entry` follows `previous` in the chain: the next number, no earlier, the same rule."""
    assert previous.number is not None and previous.created_at is not None
    assert entry.number is not None and entry.created_at is not None
    if entry.number != previous.number + 1:
        raise Failed(
            at,
            f"{entry.label}'s number field ({entry.number}) is not {previous.label}'s + 1 "
            "(a checkpoint line is missing, unreadable or misnumbered)",
        )
    if entry.created_at < previous.created_at - CLOCK_SKEW:
        raise Failed(at, f"{entry.label} claims to be created before {previous.label}")
    if previous.over_tree and not entry.over_tree:
        raise Failed(
            at, f"{entry.label} signs the chain's head, but {previous.label} signs the tree"
        )


def _checkpoint_candidate(number: int, raw: bytes) -> tuple[dict | None, str | None]:
    """The line's record and what is wrong with how it is written. A line whose JSON reads, but
    whose ends do not (a CR, blank space), is still placed as the checkpoint it says it is, so
    that its problem is named where it stands; any other bad line is the second pass's to name."""
    try:
        return read_record(number, raw), None
    except BadLine as error:
        problem = str(error)
    try:
        record = decode(raw, number)
    except BadLine:
        return None, None
    return (record, problem) if isinstance(record, dict) else (None, None)


def _claimed_size(record: dict) -> int | None:
    sequence = record.get("sequence")
    return sequence if is_count(sequence) else None
