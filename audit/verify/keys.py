"""The keys a verification trusts: the checkpoint signers' (`--public-key`, a retired one with its
range) and the witnesses' (`--witness-key`), and the quorum asked of them."""

from pathlib import Path

from audit.signed_note import CosignatureVerifier, NoteError, Verifier
from audit.verify.report import Unverifiable


def load_verifiers(specs: list[str]) -> list[Verifier]:
    """Verifier keys from `--public-key` values: a key (`name+keyid+base64`, `@SIZE` after a
    retired one), or `@path` to a file of keys, one a line, blank lines and `#` comments skipped.
    Raises Unverifiable."""
    verifiers = []
    for number, spec in enumerate(specs, 1):
        if spec.startswith("@"):
            verifiers.extend(_key_file(spec[1:]))
        else:
            # Never echo the value: a private key given here by mistake must not reach a log.
            verifiers.append(_verifier(spec, f"--public-key #{number}"))
    return trusted(verifiers)


def _key_file(path: str) -> list[Verifier]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise Unverifiable(f"cannot read the key file {path}: {reason}") from None
    verifiers = []
    for line_number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            verifiers.append(_verifier(line, f"{path} line {line_number}"))
    if not verifiers:
        raise Unverifiable(f"the key file {path} holds no key")
    return verifiers


def _verifier(text: str, where: str) -> Verifier:
    try:
        return Verifier.from_text(text)
    except (NoteError, ValueError) as error:
        raise Unverifiable(f"{where} is not a verifier key: {error}") from None


def trusted(verifiers: list[Verifier]) -> list[Verifier]:
    """`verifiers`, one per key (given twice, the smaller range wins). Raises Unverifiable unless
    at most one of them, the current signer's, is without the range `@SIZE`: every other key is
    retired, and a retired key without its range would vouch for whatever it signs today."""
    if not verifiers:
        raise Unverifiable("no public key given")
    by_key: dict[tuple[str, int], Verifier] = {}
    for verifier in verifiers:
        key = (verifier.name, verifier.key_id)
        held = by_key.get(key)
        if held is None:
            by_key[key] = verifier
        elif verifier.last_size is not None:
            by_key[key] = held.retired_at(verifier.last_size)
    unranged = [f"{v.name}+{v.key_id:08x}" for v in by_key.values() if v.last_size is None]
    if len(unranged) > 1:
        raise Unverifiable(
            f"{len(unranged)} keys are given without @SIZE ({', '.join(unranged)}): only the "
            "current signer's may be; give each retired key with the last checkpoint size it "
            "signed, KEY@SIZE, as `manage.py audit_verifier_key --all` prints it"
        )
    return list(by_key.values())


def load_witnesses(specs: list[str]) -> list[CosignatureVerifier]:
    """Witness keys from `--witness-key` values. Raises Unverifiable for a key that is not one, or
    one given twice (it would count twice towards a quorum)."""
    witnesses: dict[tuple[str, int], CosignatureVerifier] = {}
    for number, spec in enumerate(specs, 1):
        try:
            witness = CosignatureVerifier.from_text(spec)
        except (NoteError, ValueError) as error:
            raise Unverifiable(f"--witness-key #{number} is not a witness key: {error}") from None
        if (witness.name, witness.key_id) in witnesses:
            raise Unverifiable(f"--witness-key #{number} repeats an earlier one")
        witnesses[witness.name, witness.key_id] = witness
    return list(witnesses.values())


def quorum_problem(
    quorum: int, witnesses: int, known: str = "given with --witness-key"
) -> str | None:
    """Why `quorum` cosignatures cannot be asked of `witnesses` distinct witnesses (the keys
    `known` so), or None."""
    if quorum < 1:
        return f"a quorum of {quorum}: it must be at least 1"
    if quorum > witnesses:
        keys = f"{witnesses} witness key{'' if witnesses == 1 else 's'}"
        return f"a quorum of {quorum} is more than the {keys} {known}: none could meet it"
    return None
