"""Signed checkpoints in the C2SP formats: `signed-note` (text, then signature lines) carrying a
`tlog-checkpoint` body (origin, size, root hash), signed with Ed25519.

Standard library and `cryptography` only: the standalone verifier (`python -m audit.verify`)
imports this without Django.

    <origin>\\n<size>\\n<base64 root hash>\\n        the checkpoint body (what is signed)
    \\n
    — <key name> <base64(key id ‖ signature)>\\n   one line per signature

Keys are written as Go's `golang.org/x/mod/sumdb/note` writes them, so its tools read ours:
a verifier key is `<name>+<key id, 8 hex>+<base64(0x01 ‖ public key)>`, a signer key is
`PRIVATE+KEY+<name>+<key id>+<base64(0x01 ‖ private seed)>`. The key id is the first four bytes of
SHA-256(name ‖ "\\n" ‖ 0x01 ‖ public key).
"""

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

ED25519 = 0x01  # the signed-note algorithm byte for Ed25519
SIGNATURE_PREFIX = "\u2014 "  # an em dash and a space start every signature line
MAX_NOTE_BYTES = 1_000_000
MAX_SIGNATURES = 100  # as Go's note package


class NoteError(ValueError):
    """A key, note or checkpoint that is malformed, or a signature that does not verify."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int  # how many events the chain holds: the sequence of its last event
    root_hash: str  # that event's hash, hex
    extensions: tuple[str, ...] = ()

    def body(self) -> str:
        root = base64.b64encode(bytes.fromhex(self.root_hash)).decode()
        lines = [self.origin, str(self.size), root, *self.extensions]
        return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    signature: bytes


def key_id(name: str, public_key: bytes) -> int:
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()
    return struct.unpack(">I", digest[:4])[0]


def _check_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise NoteError("a key name must be non-empty, without spaces or '+'")
    return name


class Verifier:
    """A public key, and (ours, not C2SP's) the last checkpoint size it may sign: a key retired
    after a rotation signs nothing beyond where it stopped, whoever holds its private half now."""

    def __init__(self, name: str, public_key: bytes, *, last_size: int | None = None):
        self.name = _check_name(name)
        self.public_bytes = public_key
        self.key_id = key_id(name, public_key)
        self.last_size = last_size
        self._key = Ed25519PublicKey.from_public_bytes(public_key)

    @classmethod
    def from_text(cls, text: str) -> "Verifier":
        """Read a verifier key (`name+keyid+base64`), or a retired one (`name+keyid+base64@SIZE`:
        it signed checkpoints up to size SIZE, and none after)."""
        parts = text.strip().split("+", 2)  # base64 may hold "+" too: it is the rest
        if len(parts) != 3:
            raise NoteError("a verifier key reads name+keyid+base64")
        name, hex_id, encoded = parts
        encoded, retired, last = encoded.partition("@")  # "@" is never base64
        if retired and not re.fullmatch(r"0|[1-9][0-9]*", last):
            raise NoteError(f"verifier key {name}: what follows '@' is not a checkpoint size")
        key = _decode_key(encoded)
        verifier = cls(name, key, last_size=int(last) if retired else None)
        if f"{verifier.key_id:08x}" != hex_id.lower():
            raise NoteError(f"verifier key {name}: its key id does not match its key")
        return verifier

    def text(self) -> str:
        encoded = base64.b64encode(bytes([ED25519]) + self.public_bytes).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def text_with_range(self) -> str:
        """The key as `from_text` reads it back, its last size included when it has one."""
        return self.text() + ("" if self.last_size is None else f"@{self.last_size}")

    def may_sign(self, size: int) -> bool:
        return self.last_size is None or size <= self.last_size

    def retired_at(self, size: int) -> "Verifier":
        """This key, signing nothing beyond `size` (nor beyond its own last size)."""
        last = size if self.last_size is None else min(size, self.last_size)
        return Verifier(self.name, self.public_bytes, last_size=last)

    def verifies(self, message: bytes, signature: bytes) -> bool:
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


class Signer:
    def __init__(self, name: str, private_key: Ed25519PrivateKey):
        self.name = _check_name(name)
        self._key = private_key
        public = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.verifier = Verifier(name, public)
        self.key_id = self.verifier.key_id

    @classmethod
    def generate(cls, name: str) -> "Signer":
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_text(cls, text: str) -> "Signer":
        """Read a signer key (`PRIVATE+KEY+name+keyid+base64`)."""
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise NoteError("a signer key reads PRIVATE+KEY+name+keyid+base64")
        name, hex_id, encoded = parts[2:]
        seed = _decode_key(encoded)
        signer = cls(name, Ed25519PrivateKey.from_private_bytes(seed))
        if f"{signer.key_id:08x}" != hex_id.lower():
            raise NoteError(f"signer key {name}: its key id does not match its key")
        return signer

    def text(self) -> str:
        seed = self._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        encoded = base64.b64encode(bytes([ED25519]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{encoded}"

    def sign(self, text: str) -> str:
        """The signed note: `text` (which must end in a newline), a blank line, our signature."""
        _check_text(text)
        signature = self._key.sign(text.encode())
        payload = base64.b64encode(struct.pack(">I", self.key_id) + signature).decode()
        return f"{text}\n{SIGNATURE_PREFIX}{self.name} {payload}\n"


def _decode_key(encoded: str) -> bytes:
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError("a key's base64 part is not valid base64") from None
    if len(raw) != 33 or raw[0] != ED25519:
        raise NoteError("only Ed25519 keys (algorithm 0x01, 32 bytes) are supported")
    return raw[1:]


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text or text.startswith("\n"):
        raise NoteError("a note's text ends in a newline and has no blank line")


def split_note(note: str) -> tuple[str, list[Signature]]:
    """A signed note's text and its signature lines (not yet verified)."""
    if len(note.encode()) > MAX_NOTE_BYTES:
        raise NoteError("the note is too large")
    text, separator, block = note.rpartition("\n\n")
    if not separator or not block.endswith("\n"):
        raise NoteError("a signed note is text, a blank line, then signature lines")
    text += "\n"
    _check_text(text)
    signatures = []
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError("a note has too many signatures")
    for line in lines:
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError("a signature line begins with an em dash and a space")
        name, _, encoded = line[len(SIGNATURE_PREFIX) :].rpartition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise NoteError("a signature is not valid base64") from None
        if not name or len(raw) < 5:
            raise NoteError("a signature line names its key and holds id and signature")
        signatures.append(Signature(name, struct.unpack(">I", raw[:4])[0], raw[4:]))
    return text, signatures


def open_note(note: str, verifiers: "list[Verifier]") -> str:
    """The note's text, once a signature by one of `verifiers` verifies. Raises NoteError if the
    note is signed only by unknown keys, or if a known key's signature does not verify."""
    text, signatures = split_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    verified = False
    for signature in signatures:
        verifier = known.get((signature.name, signature.key_id))
        if verifier is None:
            continue
        if not verifier.verifies(text.encode(), signature.signature):
            raise NoteError(
                f"the signature by {signature.name} (key {signature.key_id:08x}) does not verify"
            )
        verified = True
    if not verified:
        names = ", ".join(f"{s.name} (key {s.key_id:08x})" for s in signatures)
        raise NoteError(f"signed only by unknown keys: {names}")
    return text


def parse_checkpoint(text: str) -> Checkpoint:
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise NoteError("a checkpoint is origin, size and root hash, one per line")
    origin, size, root, *extensions = lines[:-1]
    if not re.fullmatch(r"0|[1-9][0-9]*", size):  # ASCII digits only ("٣".isdigit() is True)
        raise NoteError("a checkpoint's size is a decimal number")
    try:
        root_bytes = base64.b64decode(root, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError("a checkpoint's root hash is not valid base64") from None
    if len(root_bytes) != 32:
        raise NoteError("a checkpoint's root hash is 32 bytes")
    return Checkpoint(origin, int(size), root_bytes.hex(), tuple(extensions))


def sign_checkpoint(signer: Signer, checkpoint: Checkpoint) -> str:
    return signer.sign(checkpoint.body())


def open_checkpoint(note: str, verifiers: "list[Verifier]") -> Checkpoint:
    checkpoint = parse_checkpoint(open_note(note, verifiers))
    signers_in_range(note, checkpoint.size, verifiers)
    return checkpoint


def signers_in_range(note: str, size: int, verifiers: "list[Verifier]") -> "tuple[Verifier, ...]":
    """The known keys that signed `note` and may sign a checkpoint of `size`. Raises NoteError
    when every known key that signed it was retired before `size`."""
    _text, signatures = split_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    signed = [known[s.name, s.key_id] for s in signatures if (s.name, s.key_id) in known]
    in_range = tuple(v for v in signed if v.may_sign(size))
    if signed and not in_range:
        retired = signed[0]
        raise NoteError(
            f"signed at #{size} by {retired.name} (key {retired.key_id:08x}), "
            f"a key retired after #{retired.last_size}"
        )
    return in_range


# Witness cosignatures (C2SP tlog-cosignature, `cosignature/v1`) ---------------------------------

COSIGNATURE_V1 = 0x04  # the signed-note algorithm byte for an Ed25519 cosignature/v1 key


def cosignature_message(checkpoint_text: str, timestamp: int) -> bytes:
    """What a witness signs: a header, the time it cosigned (Unix seconds), the checkpoint body."""
    return f"cosignature/v1\ntime {timestamp}\n{checkpoint_text}".encode()


class CosignatureVerifier:
    """A witness's public key (`name+keyid+base64(0x04 ‖ key)`)."""

    def __init__(self, name: str, public_key: bytes):
        self.name = _check_name(name)
        self.public_bytes = public_key
        digest = hashlib.sha256(name.encode() + b"\n" + bytes([COSIGNATURE_V1]) + public_key)
        self.key_id = struct.unpack(">I", digest.digest()[:4])[0]
        self._key = Ed25519PublicKey.from_public_bytes(public_key)

    @classmethod
    def from_text(cls, text: str) -> "CosignatureVerifier":
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise NoteError("a witness key reads name+keyid+base64")
        name, hex_id, encoded = parts
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise NoteError(f"witness key {name}: its base64 part is not valid base64") from None
        if len(raw) != 33 or raw[0] != COSIGNATURE_V1:
            raise NoteError(f"witness key {name}: not an Ed25519 cosignature/v1 key (0x04)")
        verifier = cls(name, raw[1:])
        if f"{verifier.key_id:08x}" != hex_id.lower():
            raise NoteError(f"witness key {name}: its key id does not match its key")
        return verifier

    def text(self) -> str:
        encoded = base64.b64encode(bytes([COSIGNATURE_V1]) + self.public_bytes).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def cosigned_at(self, checkpoint_text: str, signature: Signature) -> int | None:
        """When this witness cosigned the checkpoint with `signature` (Unix seconds), or None
        when the signature is not its, or does not verify."""
        if (signature.name, signature.key_id) != (self.name, self.key_id):
            return None
        if len(signature.signature) != 8 + 64:
            return None
        (timestamp,) = struct.unpack(">Q", signature.signature[:8])
        try:
            self._key.verify(
                signature.signature[8:], cosignature_message(checkpoint_text, timestamp)
            )
        except InvalidSignature:
            return None
        return timestamp


def cosignatures_by(note: str, witnesses: "list[CosignatureVerifier]") -> dict[str, int]:
    """Which of `witnesses` cosigned the note's checkpoint (`name+keyid` → time cosigned); a
    signature line by another key, or one that does not verify, counts for nobody."""
    text, signatures = split_note(note)
    found = {}
    for witness in witnesses:
        for signature in signatures:
            when = witness.cosigned_at(text, signature)
            if when is not None:
                found[f"{witness.name}+{witness.key_id:08x}"] = when
                break
    return found
