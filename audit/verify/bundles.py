"""Checking a proof bundle (`export_audit --prove`, or a filtered list's download): each event on
its own. Its hash recomputes, its inclusion proof leads from that hash (leaf sequence - 1) to a
root, and that root is a checkpoint's, signed by a trusted key, at the proof's tree size, for the
bundle's origin."""

from dataclasses import dataclass, field
from typing import BinaryIO

from audit import merkle
from audit.chain import event_hash
from audit.signed_note import Checkpoint, Verifier, open_note, parse_checkpoint, signers_in_range
from audit.verify.reading import (
    BUNDLE_HEADER_KEYS,
    BUNDLE_TYPE,
    BUNDLE_VERSION,
    PROOF_KEYS,
    PROOF_TYPE,
    BadLine,
    decode,
    duplicate_signer,
    event_problem,
    is_count,
    keys_problem,
    proof_hashes,
    read_lines,
    read_record,
)
from audit.verify.report import Failed, Unverifiable, VerifyReport


def is_bundle(file: BinaryIO) -> bool:
    first = next(read_lines(file), (1, None))[1]
    file.seek(0)
    try:
        header = decode(first, 1) if first is not None else None
    except BadLine:
        return False
    return isinstance(header, dict) and header.get("type") == BUNDLE_TYPE


@dataclass
class BundleRun:
    verifiers: list[Verifier]
    origin: str | None  # the origin asked for; the header's must be it
    source: str | None = None
    proven: int = 0
    keys: dict[str, None] = field(default_factory=dict)  # `name+keyid`, in the order first seen
    checkpoints: dict[str, int] = field(default_factory=dict)  # note -> its size
    proofs: list[tuple[int, str]] = field(default_factory=list)  # (sequence, note), as proven

    def verify(self, file: BinaryIO) -> VerifyReport:
        lines = read_lines(file)
        try:
            self._read_header(next(lines)[1])
            for number, raw in lines:
                try:
                    record = read_record(number, raw)
                except BadLine as error:
                    raise Failed(None, str(error)) from None
                problem, sequence = self._proof_problem(record)
                if problem:
                    raise Failed(sequence, f"line {number}: {problem}")
                self.proven += 1
            if not self.proven:
                raise Failed(None, "the bundle proves no event")
        except Failed as failure:
            return VerifyReport(
                False, self.proven, 0, failure.message, first_bad_sequence=failure.sequence
            )
        proven, count = self.proven, len(self.checkpoints)
        return VerifyReport(
            True,
            proven,
            count,
            f"{proven} event{'' if proven == 1 else 's'} proven in the signed log "
            f"({count} checkpoints; signed by {', '.join(self.keys)})",
            origin=self.origin,
            keys=tuple(self.keys),
        )

    def notes(self) -> list[tuple[str, str]]:
        """The checkpoints the proofs lead to, labelled for a witness summary."""
        return [(f"the one at size {size}", note) for note, size in self.checkpoints.items()]

    def _read_header(self, raw: bytes | None) -> None:
        # is_bundle read this line as the header: only one past MAX_LINE_BYTES reads here as None.
        header = decode(raw, 1) if raw is not None else None
        if not isinstance(header, dict):
            raise Unverifiable("not a proof bundle: its first line is not the header")
        if header.get("version") != BUNDLE_VERSION:
            raise Unverifiable(f"proof bundle version {header.get('version')!r} is not supported")
        assert raw is not None
        try:
            read_record(1, raw)
        except BadLine as error:
            raise Failed(None, str(error)) from None
        problem = keys_problem(header, BUNDLE_HEADER_KEYS, "line 1, the header,")
        if problem:
            raise Failed(None, problem)
        origin, source = header.get("origin"), header.get("source")
        if not (isinstance(source, str) and isinstance(origin, str)) or not origin.endswith(
            f"/{source}"
        ):
            raise Failed(None, f"the header's origin and source ({origin!r}, {source!r}) disagree")
        if self.origin is not None and origin != self.origin:
            raise Failed(None, f"the header's origin {origin!r} is not {self.origin!r}")
        self.origin, self.source = origin, source

    def _proof_problem(self, record: dict) -> tuple[str | None, int | None]:
        if record.get("type") != PROOF_TYPE:
            return "not an event's proof", None
        problem = keys_problem(record, PROOF_KEYS, "the proof")
        event = record.get("event")
        sequence = event.get("sequence") if isinstance(event, dict) else None
        sequence = sequence if is_count(sequence) else None
        if problem:
            return problem, sequence
        if not isinstance(event, dict):
            return "its event is malformed: not a JSON object", None
        problem = event_problem(event)
        if problem:
            return f"its event is malformed: {problem}", sequence
        assert sequence is not None  # event_problem holds it to be there, and hashed as a count
        try:
            computed = event_hash(event)
        except (TypeError, ValueError):
            computed = None
        if computed != event["hash"]:
            return f"event #{sequence} was altered: its hash does not recompute", sequence
        if event["source"] != self.source:
            return f"event #{sequence} is of source {event['source']!r}, not the header's", sequence
        return self._inclusion_problem(record, sequence, event["hash"]), sequence

    def _inclusion_problem(self, record: dict, sequence: int, chain_hash: str) -> str | None:
        index, size = record.get("leaf_index"), record.get("tree_size")
        if index != sequence - 1 or not is_count(size) or size < sequence:
            return f"event #{sequence}'s proof is for another leaf or tree size"
        proof, note = proof_hashes(record.get("hashes")), record.get("checkpoint")
        if proof is None or not isinstance(note, str):
            return f"event #{sequence}'s proof or checkpoint is malformed"
        try:
            checkpoint = parse_checkpoint(open_note(note, self.verifiers))
            signers = signers_in_range(note, checkpoint.size, self.verifiers)
        except ValueError as error:
            return f"event #{sequence}'s checkpoint does not verify: {error}"
        problem = _checkpoint_problem(checkpoint, note, size, self.origin)
        if problem:
            return f"event #{sequence}'s checkpoint {problem}"
        leaf = merkle.leaf_hash(bytes.fromhex(chain_hash))
        if not merkle.verify_inclusion(
            index, size, leaf, proof, bytes.fromhex(checkpoint.root_hash)
        ):
            return f"event #{sequence}'s proof does not lead to its checkpoint's root"
        for verifier in signers:
            self.keys[f"{verifier.name}+{verifier.key_id:08x}"] = None
        self.checkpoints[note] = checkpoint.size
        self.proofs.append((sequence, note))
        return None


def _checkpoint_problem(
    checkpoint: Checkpoint, note: str, size: int, origin: str | None
) -> str | None:
    twice = duplicate_signer(note)
    if twice:
        return f"holds two signatures by {twice}"
    if checkpoint.size != size:
        return f"is of size {checkpoint.size}, not {size}"
    if checkpoint.origin != origin:
        return f"is for origin {checkpoint.origin!r}"
    return None
