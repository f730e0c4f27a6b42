"""A log written before the tree gets its tree when migrated, so its next checkpoint signs a root
over every event, and its older checkpoints keep verifying under the head rule."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from audit import merkle
from audit.chain import GENESIS_HASH, event_hash
from audit.models import uuid7

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("audit", "0010_merge_verification_jobs_and_key_retirement")]
AFTER = [("audit", "0011_merkle_tree")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_the_tree_is_planted_over_the_events_already_written():
    old = migrate(BEFORE)
    try:
        Event, Head = old.get_model("audit", "AuditEvent"), old.get_model("audit", "ChainHead")
        prev, hashes = GENESIS_HASH, []
        for sequence in range(1, 1101):  # past one batch of a thousand
            values = {
                "id": uuid7(),
                "source": "hyperbook",
                "sequence": sequence,
                "occurred_at": timezone.now(),
                "action": "mcp.tools_list",
                "outcome": "allowed",
                "prev_hash": prev,
            }
            values["hash"] = prev = event_hash(values)
            hashes.append(prev)
            Event.objects.create(**values)
        Head.objects.create(source="hyperbook", last_sequence=1100, last_hash=prev)

        new = migrate(AFTER)
        head = new.get_model("audit", "ChainHead").objects.get()
        nodes = new.get_model("audit", "AuditTreeNode").objects
        leaves = [merkle.leaf_hash(bytes.fromhex(h)) for h in hashes]
        expected = merkle.root_of(leaves)
        assert merkle.frontier_root(merkle.frontier_from_hex(head.tree_frontier)) == expected
        assert nodes.filter(level=0).count() == 1100
        assert nodes.get(level=10, index=0).hash == merkle.root_of(leaves[:1024]).hex()
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
