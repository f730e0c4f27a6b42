"""The tree against RFC 6962's test data (as certificate-transparency publishes it), and proofs
checked both ways for every pair of sizes up to a few dozen leaves."""

import hashlib

import pytest

from audit import merkle

# certificate-transparency's RFC 6962 test leaves and the roots of each prefix.
LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOTS = {
    0: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (0, 1): [],
}
CONSISTENCY = {
    (1, 1): [],
    (1, 8): INCLUSION[(0, 8)],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (6, 7): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}


class Stored:
    """Every node a tree of these leaves completes, as the database stores them."""

    def __init__(self, leaves):
        self.nodes, frontier = {}, []
        for size, entry in enumerate(leaves):
            for level, index, value in merkle.frontier_append(frontier, size, entry):
                self.nodes[(level, index)] = value
        self.reads = []

    def read(self, wanted):
        self.reads.append(len(wanted))
        return {node: self.nodes[node] for node in wanted if node in self.nodes}


LEAF_HASHES = [merkle.leaf_hash(entry) for entry in LEAVES]
TREE = Stored(LEAF_HASHES)


def hexes(values):
    return [value.hex() for value in values]


def test_the_empty_tree_and_the_hashing_rule():
    assert merkle.EMPTY_ROOT == hashlib.sha256(b"").digest()
    assert merkle.leaf_hash(b"") == hashlib.sha256(b"\x00").digest()
    assert (
        merkle.node_hash(b"a" * 32, b"b" * 32)
        == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    )


@pytest.mark.parametrize("size", sorted(ROOTS))
def test_roots_of_every_prefix(size):
    assert merkle.root_of(LEAF_HASHES[:size]).hex() == ROOTS[size]
    frontier = [TREE.nodes[node] for node in merkle.frontier_nodes(size)]
    assert merkle.frontier_root(frontier).hex() == ROOTS[size]


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
def test_inclusion_proofs(index, size):
    proof = merkle.proof_hashes(merkle.inclusion_ranges(index, size), TREE.read)
    assert hexes(proof) == INCLUSION[(index, size)]
    root = bytes.fromhex(ROOTS[size])
    assert merkle.verify_inclusion(index, size, LEAF_HASHES[index], proof, root)
    if index:
        assert not merkle.verify_inclusion(index, size, LEAF_HASHES[index - 1], proof, root)


@pytest.mark.parametrize(("old", "new"), sorted(CONSISTENCY))
def test_consistency_proofs(old, new):
    proof = merkle.proof_hashes(merkle.consistency_ranges(old, new), TREE.read)
    assert hexes(proof) == CONSISTENCY[(old, new)]
    old_root, new_root = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new])
    assert merkle.verify_consistency(old, new, old_root, new_root, proof)
    if old != new:
        assert not merkle.verify_consistency(old, new, new_root, new_root, proof)


def test_every_proof_up_to_40_leaves_verifies_and_a_changed_hash_does_not():
    leaves = [merkle.leaf_hash(str(n).encode()) for n in range(40)]
    tree = Stored(leaves)
    roots = [merkle.root_of(leaves[:size]) for size in range(41)]
    for size in range(1, 41):
        for index in range(size):
            proof = merkle.proof_hashes(merkle.inclusion_ranges(index, size), tree.read)
            assert merkle.verify_inclusion(index, size, leaves[index], proof, roots[size])
            if size > 1:  # the same hashes do not prove another leaf's place
                other = (index + 1) % size
                assert not merkle.verify_inclusion(other, size, leaves[index], proof, roots[size])
            if proof:
                bent = [proof[0][:-1] + bytes([proof[0][-1] ^ 1]), *proof[1:]]
                assert not merkle.verify_inclusion(index, size, leaves[index], bent, roots[size])
        for old in range(1, size + 1):
            proof = merkle.proof_hashes(merkle.consistency_ranges(old, size), tree.read)
            assert merkle.verify_consistency(old, size, roots[old], roots[size], proof)
            assert not merkle.verify_consistency(old, size, roots[old - 1], roots[size], proof)
            if proof:
                assert not merkle.verify_consistency(old, size, roots[old], roots[size], proof[:-1])


def test_a_proof_reads_the_store_once_and_few_nodes():
    leaves = [merkle.leaf_hash(str(n).encode()) for n in range(1000)]
    tree = Stored(leaves)
    tree.reads.clear()
    merkle.proof_hashes(merkle.inclusion_ranges(377, 999), tree.read)
    merkle.proof_hashes(merkle.consistency_ranges(377, 999), tree.read)
    assert len(tree.reads) == 2
    assert max(tree.reads) <= 2 * 10  # O(log n) nodes, never the leaves


def test_a_missing_node_is_a_lookup_error():
    with pytest.raises(LookupError, match="not stored"):
        merkle.proof_hashes(merkle.inclusion_ranges(3, 20), TREE.read)


@pytest.mark.parametrize(("index", "size"), [(-1, 3), (3, 3), (0, 0)])
def test_impossible_inclusion_requests(index, size):
    with pytest.raises(ValueError):
        merkle.inclusion_ranges(index, size)
    assert merkle.root_from_inclusion(index, size, LEAF_HASHES[0], []) is None
