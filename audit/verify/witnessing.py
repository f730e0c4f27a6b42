"""What witnesses cosigned ([C2SP tlog-witness](https://c2sp.org/tlog-witness)): how many of the
given witnesses cosigned a checkpoint's note, and which checkpoints met a quorum, in one phrase."""

from audit.signed_note import CosignatureVerifier, NoteError, cosignatures_by


def cosigned(note: str, witnesses: list[CosignatureVerifier]) -> int:
    """How many of `witnesses` cosigned the note's checkpoint (a line that does not verify counts
    for nobody, nor does a second line by the same witness)."""
    try:
        return len(cosignatures_by(note, witnesses))
    except NoteError:
        return 0


def witnessed_notes(
    notes: list[tuple[str, str]], witnesses: list[CosignatureVerifier], quorum: int
) -> set[str]:
    return {note for _, note in notes if cosigned(note, witnesses) >= quorum}


def witness_summary(
    notes: list[tuple[str, str]], witnesses: list[CosignatureVerifier], quorum: int
) -> str:
    """Which checkpoints (labelled, in order) `quorum` of `witnesses` cosigned, in one phrase."""
    met: list[str] = []
    short: list[str] = []
    for label, note in dict(notes).items():
        (met if cosigned(note, witnesses) >= quorum else short).append(label)
    return (
        f"witnessed (quorum {quorum} of {len(witnesses)}): "
        f"{', '.join(met) or 'none'}; not witnessed: {', '.join(short) or 'none'}"
    )
