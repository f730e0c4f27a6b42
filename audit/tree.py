"""Reading the audit log's Merkle tree from its stored nodes: roots and proofs at any size the
log has reached, each from one query over O(log n) rows (`audit.merkle` names the nodes)."""

import functools
import operator

from django.db.models import Q

from audit import merkle
from audit.models import AuditTreeNode, ChainHead


class TreeError(LookupError):
    """The tree does not reach that size, or the request is not a proof; the message says which."""


def _read_nodes(source: str):
    def read(wanted: set[merkle.Node]) -> dict[merkle.Node, bytes]:
        if not wanted:
            return {}
        where = functools.reduce(
            operator.or_, (Q(level=level, index=index) for level, index in wanted)
        )
        rows = AuditTreeNode.objects.filter(where, source=source).values_list(
            "level", "index", "hash"
        )
        return {(level, index): bytes.fromhex(value) for level, index, value in rows}

    return read


def tree_size(source: str) -> int:
    head = ChainHead.objects.filter(source=source).values_list("last_sequence", flat=True).first()
    return head or 0


def tree_root(source: str, size: int) -> bytes:
    """The root over events #1..#size, from the nodes stored for them."""
    if size == 0:
        return merkle.EMPTY_ROOT
    try:
        (root,) = merkle.proof_hashes([(0, size)], _read_nodes(source))
    except LookupError as exc:
        raise TreeError(f"the tree does not reach size {size}: {exc}") from None
    return root


def inclusion_proof(source: str, sequence: int, size: int) -> list[bytes]:
    """The proof that event #sequence (leaf sequence - 1) is in the tree of `size` events."""
    if not 1 <= sequence <= size:
        raise TreeError(f"event #{sequence} is not in a tree of size {size}")
    return _proof(source, merkle.inclusion_ranges(sequence - 1, size), size)


def consistency_proof(source: str, old: int, new: int) -> list[bytes]:
    """The proof that the tree of `old` events is a prefix of the tree of `new` events."""
    if not 1 <= old <= new:
        raise TreeError(f"no consistency proof from size {old} to size {new}")
    return _proof(source, merkle.consistency_ranges(old, new), new)


def _proof(source: str, ranges: list[tuple[int, int]], size: int) -> list[bytes]:
    if size > tree_size(source):
        raise TreeError(f"the log holds fewer than {size} events")
    try:
        return merkle.proof_hashes(ranges, _read_nodes(source))
    except LookupError as exc:
        raise TreeError(f"the tree does not reach size {size}: {exc}") from None


def tree_ends_with(source: str, size: int, head_hash: str, root_hex: str) -> bool:
    """Whether `root_hex` is the root of a tree of `size` events whose last leaf is the chain hash
    `head_hash`, by the last leaf's inclusion proof from the stored nodes. The chain hash commits
    to every event before it, and a node that does not match them leads to another root."""
    try:
        proof = inclusion_proof(source, size, size)
    except TreeError:
        return False
    leaf = merkle.leaf_hash(bytes.fromhex(head_hash))
    return merkle.verify_inclusion(size - 1, size, leaf, proof, bytes.fromhex(root_hex))
