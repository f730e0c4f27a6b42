"""`python -m audit.verify FILE --public-key KEY`: which kind of file it is, the keys and the
witnesses' quorum it is held to, and the exit status (0 verified, 1 a problem found, 2 nothing
could be verified: an unreadable file, a bad key or option)."""

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import BinaryIO

from audit.signed_note import CosignatureVerifier, Verifier
from audit.verify.bundles import BundleRun, is_bundle
from audit.verify.exports import ExportRun
from audit.verify.keys import load_verifiers, load_witnesses, quorum_problem, trusted
from audit.verify.report import Unverifiable, VerifyReport, printable
from audit.verify.witnessing import cosigned, witness_summary, witnessed_notes


def verify_export(
    path: str | Path,
    verifiers: list[Verifier],
    origin: str | None = None,
    witnesses: list[CosignatureVerifier] | None = None,
    quorum: int | None = None,
) -> VerifyReport:
    """Verify the export (or proof bundle) at `path` against `verifiers`, stopping at the first
    problem. With `witnesses`, also say which of its checkpoints they cosigned; with `quorum`,
    fail unless that many of them cosigned a checkpoint covering every event. Raises Unverifiable
    if the file cannot be read or is not an export at all, or a key or the quorum cannot be used."""
    verifiers = trusted(verifiers)
    witnesses = witnesses or []
    if quorum is not None:
        problem = quorum_problem(quorum, len(witnesses))
        if problem:
            raise Unverifiable(f"--quorum: {problem}")
    try:
        with open(path, "rb") as file:
            if is_bundle(file):
                return _verify_bundle(file, verifiers, origin, witnesses, quorum)
            return _verify_jsonl(file, verifiers, origin, witnesses, quorum)
    except OSError as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise Unverifiable(f"cannot read {path}: {reason}") from None


def _verify_jsonl(
    file: BinaryIO,
    verifiers: list[Verifier],
    origin: str | None,
    witnesses: list[CosignatureVerifier],
    quorum: int | None,
) -> VerifyReport:
    run = ExportRun(verifiers, origin)
    run.read_header_and_checkpoints(file)
    file.seek(0)
    report = run.verify_events(file)
    if not report.ok or not witnesses:
        return report
    notes = [(str(e.number), e.note) for e in run.entries if e.note]
    summary = witness_summary(notes, witnesses, quorum or 1)
    short = run.unwitnessed_from(witnessed_notes(notes, witnesses, quorum)) if quorum else None
    if short is None:
        return dataclasses.replace(report, message=f"{report.message}; {summary}")
    sequence, last = short
    assert last.note is not None  # every entry was checked, so opened
    return _short_of_quorum(
        report,
        sequence,
        f"events from #{sequence} on are not witnessed: {last.label} (#{last.size}), the last, "
        f"has {cosigned(last.note, witnesses)} of the {quorum} cosignatures --quorum asks for; "
        f"{summary}",
    )


def _verify_bundle(
    file: BinaryIO,
    verifiers: list[Verifier],
    origin: str | None,
    witnesses: list[CosignatureVerifier],
    quorum: int | None,
) -> VerifyReport:
    run = BundleRun(verifiers, origin)
    report = run.verify(file)
    if not report.ok or not witnesses:
        return report
    summary = witness_summary(run.notes(), witnesses, quorum or 1)
    witnessed = witnessed_notes(run.notes(), witnesses, quorum) if quorum else None
    short = [] if witnessed is None else [p for p in run.proofs if p[1] not in witnessed]
    if not short:
        return dataclasses.replace(report, message=f"{report.message}; {summary}")
    sequence, note = min(short)
    return _short_of_quorum(
        report,
        sequence,
        f"event #{sequence} is not witnessed: the checkpoint it is proven in (size "
        f"{run.checkpoints[note]}) has {cosigned(note, witnesses)} of the {quorum} cosignatures "
        f"--quorum asks for; {summary}",
    )


def _short_of_quorum(report: VerifyReport, sequence: int, message: str) -> VerifyReport:
    return dataclasses.replace(report, ok=False, message=message, first_bad_sequence=sequence)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        report = verify_export(
            args.file,
            load_verifiers(args.public_key),
            origin=args.origin,
            witnesses=load_witnesses(args.witness_key),
            quorum=args.quorum,
        )
    except Unverifiable as error:
        print(printable(f"error: {error}"), file=sys.stderr)
        return 2
    except Exception as error:  # a bug of ours: say so in one line, never pass a bad file
        print(
            printable(f"error: could not verify: {type(error).__name__}: {error}"), file=sys.stderr
        )
        return 2
    print(report.line(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m audit.verify",
        description=(
            "Verify a hyperbook audit export or proof bundle (JSON Lines) against signed "
            "checkpoints. Exit status: 0 verified, 1 a problem found (the line names the first "
            "bad sequence), 2 nothing verified (unreadable file, bad key or option)."
        ),
    )
    parser.add_argument(
        "file", help="an export or proof bundle (manage.py export_audit --format jsonl, --prove)"
    )
    parser.add_argument(
        "--public-key",
        action="append",
        required=True,
        metavar="KEY",
        help=(
            "a verifier key (name+keyid+base64; a retired key with @SIZE, the last checkpoint "
            "size it signed: only the current signer's key may go without) or @FILE of keys; "
            "repeat for rotated keys"
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
        "--quorum",
        type=int,
        metavar="N",
        help=(
            "fail unless N of the witness keys cosigned a checkpoint covering every event (at "
            "most the number of --witness-key); without it, which checkpoints one witness "
            "cosigned is only reported"
        ),
    )
    return parser
