"""Checks an audit export or proof bundle without trusting our database:
`python -m audit.verify FILE --public-key KEY`.

Standard library, `cryptography` and audit.chain, audit.merkle and audit.signed_note only, so
whoever receives an export can run it without Django. Only the signed notes and the events' hashes
are trusted, and a file is read as strictly as it is written: every other field a reader might go
by must agree with them, and a line with a key twice, a key no export writes, a CR, a number or
signature the hash or the note cannot tell apart from another, or lines out of their order are
refused. `reading` reads lines and records; `exports` and `bundles` check the two kinds of file;
`keys` and `witnessing` hold the trusted keys and the quorum; `cli` is the command.
"""

from audit.verify.cli import main, verify_export
from audit.verify.keys import load_verifiers, load_witnesses
from audit.verify.reading import (
    BUNDLE_TYPE,
    BUNDLE_VERSION,
    CHECKPOINT_TYPE,
    EVENT_TYPE,
    EXPORT_TYPE,
    EXPORT_VERSION,
    PROOF_TYPE,
)
from audit.verify.report import Unverifiable, VerifyReport
from audit.verify.witnessing import cosigned, witness_summary

__all__ = [
    "BUNDLE_TYPE",
    "BUNDLE_VERSION",
    "CHECKPOINT_TYPE",
    "EVENT_TYPE",
    "EXPORT_TYPE",
    "EXPORT_VERSION",
    "PROOF_TYPE",
    "Unverifiable",
    "VerifyReport",
    "cosigned",
    "load_verifiers",
    "load_witnesses",
    "main",
    "verify_export",
    "witness_summary",
]
