"""The audit log's RFC 6962 Merkle tree: hashes, roots, inclusion and consistency proofs.

Leaf n-1 is the 32 raw bytes of event #n's chain hash, so a leaf commits to that event's canonical
JSON and, through `prev_hash`, to every event before it. A node is named (level, index): the root
of the perfect subtree over leaves [index · 2^level, (index + 1) · 2^level). Only such perfect
subtrees are stored (`audit.models.AuditTreeNode`), as they are completed; every other hash a
proof needs is folded from O(log n) of them, so a proof never scans the log.

Standard library only: the standalone verifier (`python -m audit.verify`) imports this without
Django. Written here rather than taken from a package because the nodes live in our database, the
verifier must run on a bare Python, and RFC 9162 §2.1 fits in this page.
"""

import hashlib
from collections.abc import Callable, Iterable

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

Node = tuple[int, int]  # (level, index)


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than `size` (> 1): where RFC 6962 splits a tree."""
    return 1 << ((size - 1).bit_length() - 1)


# Appending --------------------------------------------------------------------------------------


def frontier_append(frontier: list[bytes], size: int, leaf: bytes) -> list[tuple[int, int, bytes]]:
    """Add the leaf hash `leaf` at index `size`, updating `frontier` in place, and return the
    nodes it completes (the leaf first). `frontier` holds the hashes of the perfect subtrees a
    tree of `size` leaves decomposes into, largest (leftmost) first: one per set bit of `size`."""
    completed = [(0, size, leaf)]
    level, index, value = 0, size, leaf
    while index & 1:  # a right child: its left sibling is the frontier's smallest subtree
        value = node_hash(frontier.pop(), value)
        level, index = level + 1, index >> 1
        completed.append((level, index, value))
    frontier.append(value)
    return completed


def frontier_from_hex(text: str) -> list[bytes]:
    """A frontier as `audit.models.ChainHead` stores it: its hashes in hex, concatenated."""
    return [
        bytes.fromhex(text[at : at + 2 * HASH_SIZE]) for at in range(0, len(text), 2 * HASH_SIZE)
    ]


def frontier_hex(frontier: list[bytes]) -> str:
    return "".join(value.hex() for value in frontier)


def frontier_root(frontier: Iterable[bytes]) -> bytes:
    """The root of the tree whose frontier this is: its subtrees folded from the right."""
    subtrees = list(frontier)
    if not subtrees:
        return EMPTY_ROOT
    value = subtrees[-1]
    for left in reversed(subtrees[:-1]):
        value = node_hash(left, value)
    return value


def frontier_nodes(size: int) -> list[Node]:
    """The nodes of the frontier of a tree of `size` leaves, leftmost first."""
    return range_nodes(0, size)


def root_of(leaves: Iterable[bytes]) -> bytes:
    """The root over these leaf hashes (for tests and rebuilding; proofs use stored nodes)."""
    frontier: list[bytes] = []
    for size, leaf in enumerate(leaves):
        frontier_append(frontier, size, leaf)
    return frontier_root(frontier)


# Proofs as ranges, then as hashes -----------------------------------------------------------------


def range_nodes(lo: int, hi: int) -> list[Node]:
    """The perfect subtrees that make up leaves [lo, hi), left to right, where `lo` is a multiple
    of the largest power of two not above hi - lo (as every range in RFC 6962's recursion is)."""
    nodes = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        while lo % (1 << level):  # never for the ranges proofs ask for; kept correct anyway
            level -= 1
        nodes.append((level, lo >> level))
        lo += 1 << level
    return nodes


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """RFC 9162 PATH(index, D[0:size]) as leaf ranges, bottom first."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    ranges = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo = lo + k
    return ranges[::-1]


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """RFC 9162 PROOF(old, D[0:new]) as leaf ranges, bottom first."""
    if not 0 < old <= new:
        raise ValueError(f"no consistency proof from size {old} to size {new}")
    ranges = []
    lo, hi, complete = 0, new, True
    while hi != old or not complete:
        if hi == old:  # SUBPROOF's "m = n, b false": the old tree's own subtree
            ranges.append((lo, hi))
            break
        k = _split(hi - lo)
        if old <= lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, complete = lo + k, False
    return ranges[::-1]


def proof_hashes(
    ranges: list[tuple[int, int]], read_nodes: Callable[[set[Node]], dict[Node, bytes]]
) -> list[bytes]:
    """The hashes of `ranges`, from the nodes `read_nodes` returns for the set asked (one read).
    A node it does not return raises LookupError: the tree is not stored that far."""
    covers = [range_nodes(lo, hi) for lo, hi in ranges]
    stored = read_nodes({node for nodes in covers for node in nodes})
    try:
        return [frontier_root(stored[node] for node in nodes) for nodes in covers]
    except KeyError as missing:
        raise LookupError(f"tree node {missing.args[0]} is not stored") from None


# Verifying (RFC 9162 §2.1.3.2 and §2.1.4.2) -------------------------------------------------------


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    """The root an inclusion proof leads to, or None when the proof cannot be one for
    (index, size) at all (wrong length, index out of range)."""
    if not 0 <= index < size:
        return None
    fn, sn, value = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            value = node_hash(sibling, value)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            value = node_hash(value, sibling)
        fn, sn = fn >> 1, sn >> 1
    return value if sn == 0 else None


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    return root_from_inclusion(index, size, leaf, proof) == root


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: list[bytes]
) -> bool:
    if not 0 < old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is itself a node of the new tree
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    old_value = new_value = path[0]
    for sibling in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_value = node_hash(sibling, old_value)
            new_value = node_hash(sibling, new_value)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            new_value = node_hash(new_value, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and old_value == old_root and new_value == new_root
