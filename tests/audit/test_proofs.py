"""Proofs over the signed log: inclusion and consistency from the API, one event proven on its own
in a bundle the standalone verifier checks, the rule change from head checkpoints to tree
checkpoints, and tampering caught with the sequence named."""

import base64
import io
import json
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit import merkle
from audit.checkpoints import checkpoint_create_if_due, current_signer, origin_for
from audit.models import AuditCheckpoint, AuditEvent
from audit.services import audit_events_append
from audit.signed_note import Checkpoint, open_checkpoint
from audit.verification import verify_chain
from audit.verify import main as verify_main
from tests.audit.test_verify import run_standalone

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def slow_checkpoints(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10_000
    settings.AUDIT_CHECKPOINT_SECONDS = 3600


def append(n: int) -> None:
    audit_events_append(
        events=[
            {"action": "mcp.tools_list", "outcome": "allowed", "detail": f"e{i}"} for i in range(n)
        ]
    )


def signed_at(n_events: int) -> AuditCheckpoint:
    have = AuditEvent.objects.count()
    append(n_events - have)
    return checkpoint_create_if_due(force=True)


def leaf_of(sequence: int) -> bytes:
    value = AuditEvent.objects.get(sequence=sequence).hash
    return merkle.leaf_hash(bytes.fromhex(value))


def decoded(hashes):
    return [base64.b64decode(h) for h in hashes]


@pytest.fixture
def api(client, auditor):
    client.force_login(auditor)
    return client


def test_an_inclusion_proof_from_the_api_leads_to_the_signed_root(api):
    signed_at(7)
    latest = signed_at(23)
    for sequence in (1, 7, 16, 23):
        body = api.get(f"/api/audit-events/{sequence}/inclusion-proof/").json()
        assert (body["leaf_index"], body["tree_size"]) == (sequence - 1, 23)
        note = open_checkpoint(body["checkpoint"], [current_signer().verifier])
        assert note.size == 23 and body["checkpoint"] == latest.note
        root = bytes.fromhex(note.root_hash)
        assert merkle.verify_inclusion(
            sequence - 1, 23, leaf_of(sequence), decoded(body["hashes"]), root
        )
    # Against the earlier checkpoint, by its size.
    body = api.get("/api/audit-events/5/inclusion-proof/?tree_size=7").json()
    root = bytes.fromhex(open_checkpoint(body["checkpoint"], [current_signer().verifier]).root_hash)
    assert body["tree_size"] == 7
    assert merkle.verify_inclusion(4, 7, leaf_of(5), decoded(body["hashes"]), root)


def test_a_consistency_proof_from_the_api_links_two_checkpoints(api):
    first, second = signed_at(6), signed_at(19)
    body = api.get("/api/audit-checkpoints/consistency-proof/?from=6&to=19").json()
    assert (body["from"], body["to"]) == (6, 19)
    old, new = bytes.fromhex(first.hash), bytes.fromhex(second.hash)
    assert merkle.verify_consistency(6, 19, old, new, decoded(body["hashes"]))
    assert not merkle.verify_consistency(6, 19, new, new, decoded(body["hashes"]))


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("/api/audit-events/9/inclusion-proof/", 400, "not in the tree of size 5"),
        ("/api/audit-events/0/inclusion-proof/", 400, "not in the tree"),
        ("/api/audit-events/2/inclusion-proof/?tree_size=4", 404, "no checkpoint was signed at"),
        ("/api/audit-events/2/inclusion-proof/?tree_size=x", 400, "tree size"),
        ("/api/audit-events/2/inclusion-proof/?tree_size=99999999999999999999", 400, "tree size"),
        ("/api/audit-checkpoints/consistency-proof/?from=3&to=2", 400, "1 <= from <= to"),
        ("/api/audit-checkpoints/consistency-proof/?from=1&to=6", 404, "fewer than 6"),
        ("/api/audit-checkpoints/consistency-proof/?from=1", 400, "tree size"),
    ],
)
def test_impossible_proofs_are_clear_refusals(api, url, status, says):
    signed_at(5)
    response = api.get(url)
    assert response.status_code == status
    assert says in json.dumps(response.json())


def test_proofs_are_for_auditors_and_administrators_only(client, django_user_model):
    signed_at(3)
    assert client.get("/api/audit-events/1/inclusion-proof/").status_code in (401, 403)
    user = django_user_model.objects.create_user("someone", password="pw-for-tests-only")
    client.force_login(user)
    assert client.get("/api/audit-checkpoints/consistency-proof/?from=1&to=3").status_code == 403


def old_rule_checkpoint(number: int) -> AuditCheckpoint:
    """A checkpoint as they were signed before the tree: over the chain's head."""
    last = AuditEvent.objects.order_by("-sequence").first()
    origin = origin_for("hyperbook")
    note = current_signer().sign(Checkpoint(origin, last.sequence, last.hash).body())
    return AuditCheckpoint.objects.create(
        id=uuid.uuid4(),
        source="hyperbook",
        number=number,
        sequence=last.sequence,
        hash=last.hash,
        prev_hash="0" * 64,
        origin=origin,
        key_id=f"{current_signer().key_id:08x}",
        note=note,
        created_at=last.occurred_at,
    )


def test_checkpoints_signed_before_the_tree_stay_valid_and_the_rule_changes_once(api, tmp_path):
    append(4)
    old_rule_checkpoint(1)
    tree = signed_at(9)
    assert tree.number == 2 and tree.head_hash is not None
    report = verify_chain()
    assert report.ok and report.checkpoints_checked == 2, report.message
    # An export across the change verifies: the old one by its head, the new one by its tree.
    out = io.StringIO()
    call_command("export_audit", stdout=out, stderr=io.StringIO())
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue())
    assert verify_main([str(path), "--public-key", current_signer().verifier.text()]) == 0
    # The old checkpoint cannot be proven against; the new one can.
    response = api.get("/api/audit-events/2/inclusion-proof/?tree_size=4")
    assert response.status_code == 409 and "before the tree existed" in response.json()["detail"]
    # No head checkpoint after a tree one.
    append(1)
    old_rule_checkpoint(3)
    report = verify_chain()
    assert not report.ok and "checkpoint 3 signs the chain's head" in report.message


def prove(*sequences: int) -> str:
    out = io.StringIO()
    args = [a for s in sequences for a in ("--prove", str(s))]
    call_command("export_audit", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def bundle(tmp_path):
    signed_at(12)
    text = prove(3, 12, 7)
    path = tmp_path / "bundle.jsonl"
    path.write_text(text)
    return path


def verify_file(path, capsys) -> tuple[int, str]:
    status = verify_main([str(path), "--public-key", current_signer().verifier.text()])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_a_bundle_proves_each_event_on_its_own(bundle, capsys):
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    assert lines[0]["type"] == "hyperbook.audit_proof"
    assert [line["event"]["sequence"] for line in lines[1:]] == [3, 7, 12]
    status, said = verify_file(bundle, capsys)
    assert status == 0 and said.startswith("ok: 3 events proven"), said


@pytest.mark.slow
def test_the_bundle_verifier_runs_without_django(bundle, tmp_path):
    result = run_standalone(tmp_path, str(bundle), "--public-key", current_signer().verifier.text())
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.startswith("ok: 3 events proven")


def rewrite(path, change) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    change(lines)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def changed_detail(lines):
    lines[2]["event"]["detail"] = "not what happened"


def changed_and_rehashed(lines):
    from audit.chain import event_hash

    lines[2]["event"]["detail"] = "not what happened"
    lines[2]["event"]["hash"] = event_hash(lines[2]["event"])


def swapped_pair(lines):
    hashes = lines[2]["hashes"]
    hashes[0], hashes[1] = hashes[1], hashes[0]


def wrong_size(lines):
    lines[2]["tree_size"] = 13


def other_events_proof(lines):
    lines[2]["hashes"], lines[2]["leaf_index"] = lines[1]["hashes"], 2


def unsigned_key(lines):
    lines[2]["verified"] = True


def event_with_a_type(lines):
    lines[2]["event"]["type"] = "audit_event"


def signature_line_twice(lines):
    note = lines[2]["checkpoint"]
    lines[2]["checkpoint"] = note + note.split("\n\n")[1]


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        (unsigned_key, "line 3: the proof holds 'verified', which no export writes or signs"),
        (event_with_a_type, "its event is malformed: its hash does not cover 'type'"),
        (signature_line_twice, "event #7's checkpoint holds two signatures by"),
        (changed_detail, "event #7 was altered"),
        (changed_and_rehashed, "event #7's proof does not lead to its checkpoint's root"),
        (swapped_pair, "event #7's proof does not lead"),
        (wrong_size, "event #7's checkpoint is of size 12, not 13"),
        (other_events_proof, "event #7's proof is for another leaf"),
    ],
)
def test_a_tampered_bundle_fails_naming_the_event(bundle, capsys, tamper, says):
    rewrite(bundle, tamper)
    status, said = verify_file(bundle, capsys)
    assert status == 1 and says in said, said
    assert "FAILED at #7" in said


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        (lambda lines: lines[0].update(signed_by="us"), "line 1, the header, holds 'signed_by'"),
        (lambda lines: lines[0].update(source="other"), "the header's origin and source ("),
    ],
    ids=["unsigned key", "source"],
)
def test_a_bundle_with_a_header_no_export_writes_fails(bundle, capsys, tamper, says):
    rewrite(bundle, tamper)
    status, said = verify_file(bundle, capsys)
    assert status == 1 and said.startswith(f"FAILED: {says}"), said


def test_a_bundle_with_crlf_line_ends_fails(bundle, capsys):
    bundle.write_bytes(bundle.read_bytes().replace(b"\n", b"\r\n"))
    status, said = verify_file(bundle, capsys)
    assert status == 1 and said.startswith("FAILED: line 1 holds a carriage return"), said


def test_a_bundle_signs_a_checkpoint_when_none_covers_its_events_and_refuses_missing_ones(
    tmp_path, capsys
):
    signed_at(4)
    append(2)
    path = tmp_path / "bundle.jsonl"
    path.write_text(prove(2, 6))
    assert AuditCheckpoint.objects.latest("number").sequence == 6
    status, said = verify_file(path, capsys)
    assert status == 0 and said.startswith("ok: 2 events proven"), said
    with pytest.raises(CommandError, match="there is no event #9"):
        prove(2, 9)


def tamper_sql(sql, params=()):
    """Change a table the way someone with database access could: the append-only triggers
    dropped first (SQLite's refuse UPDATE; PostgreSQL's also DELETE)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TRIGGER IF EXISTS audit_event_no_update")
            cursor.execute("DROP TRIGGER IF EXISTS audit_tree_node_no_update")
            cursor.execute("DROP TRIGGER IF EXISTS audit_checkpoint_no_update")
        else:
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER USER")
            cursor.execute("ALTER TABLE audit_audittreenode DISABLE TRIGGER USER")
            cursor.execute("ALTER TABLE audit_auditcheckpoint DISABLE TRIGGER USER")
        cursor.execute(sql, params)


def test_a_tree_node_changed_in_the_database_is_caught_by_the_check_and_the_proofs(api):
    signed_at(8)
    body = api.get("/api/audit-events/8/inclusion-proof/").json()
    # The leaf of #8's sibling subtree is replaced, as if the tree were regrown over other events.
    tamper_sql(
        "UPDATE audit_audittreenode SET hash = %s WHERE level = 2 AND "
        + connection.ops.quote_name("index")
        + " = 0",
        ["11" * 32],
    )
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == 8, report.message
    assert "does not match signed checkpoint 1" in report.message
    forged = api.get("/api/audit-events/8/inclusion-proof/").json()
    root = bytes.fromhex(
        open_checkpoint(forged["checkpoint"], [current_signer().verifier]).root_hash
    )
    assert forged["hashes"] != body["hashes"]
    assert not merkle.verify_inclusion(7, 8, leaf_of(8), decoded(forged["hashes"]), root)


def test_a_checkpoint_at_a_size_the_tree_does_not_have_is_caught(api):
    append(6)
    # Signed over the root of 5 events while claiming 6: the tree at 6 does not have that root.
    from audit import tree

    origin = origin_for("hyperbook")
    wrong_root = tree.tree_root("hyperbook", 5).hex()
    last = AuditEvent.objects.get(sequence=6)
    AuditCheckpoint.objects.create(
        id=uuid.uuid4(),
        source="hyperbook",
        number=1,
        sequence=6,
        hash=wrong_root,
        head_hash=last.hash,
        prev_hash="0" * 64,
        origin=origin,
        key_id=f"{current_signer().key_id:08x}",
        note=current_signer().sign(Checkpoint(origin, 6, wrong_root).body()),
        created_at=last.occurred_at,
    )
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == 6
    assert "does not match signed checkpoint 1" in report.message
    body = api.get("/api/audit-events/3/inclusion-proof/").json()
    root = bytes.fromhex(wrong_root)
    assert not merkle.verify_inclusion(2, 6, leaf_of(3), decoded(body["hashes"]), root)


def rewrite_tail(start: int) -> None:
    """What someone with write access could do: change event #start, re-chain every event after
    it, regrow the whole tree over the new hashes and move the head, all consistently."""
    from audit.chain import event_hash
    from audit.models import AuditTreeNode, ChainHead

    rows = list(AuditEvent.objects.filter(sequence__gte=start - 1).order_by("sequence").values())
    prev = rows[0]["hash"] if start > 1 else "0" * 64
    for row in rows[1:] if start > 1 else rows:
        if row["sequence"] == start:
            row["detail"] = "rewritten"
        row["prev_hash"] = prev
        row["hash"] = prev = event_hash(row)
        tamper_sql(
            "UPDATE audit_auditevent SET detail = %s, prev_hash = %s, hash = %s WHERE id = %s",
            [row["detail"], row["prev_hash"], row["hash"], str(row["id"]).replace("-", "")]
            if connection.vendor == "sqlite"
            else [row["detail"], row["prev_hash"], row["hash"], row["id"]],
        )
    tamper_sql("DELETE FROM audit_audittreenode")
    frontier, nodes = [], []
    hashes = AuditEvent.objects.order_by("sequence").values_list("hash", flat=True)
    for size, value in enumerate(hashes):
        for level, index, node in merkle.frontier_append(
            frontier, size, merkle.leaf_hash(bytes.fromhex(value))
        ):
            nodes.append(
                AuditTreeNode(source="hyperbook", level=level, index=index, hash=node.hex())
            )
    AuditTreeNode.objects.bulk_create(nodes)
    ChainHead.objects.filter(source="hyperbook").update(
        last_hash=prev, tree_frontier=merkle.frontier_hex(frontier)
    )


def test_a_rewritten_tail_is_caught_by_the_check_and_by_the_proofs(api):
    first = signed_at(10)
    rewrite_tail(6)
    report = verify_chain()
    assert not report.ok and report.first_bad_sequence == 10, report.message
    # A new checkpoint over the rewritten log is not consistent with the first one.
    append(3)
    second = checkpoint_create_if_due(force=True)
    body = api.get("/api/audit-checkpoints/consistency-proof/?from=10&to=13").json()
    old, new = bytes.fromhex(first.hash), bytes.fromhex(second.hash)
    assert not merkle.verify_consistency(10, 13, old, new, decoded(body["hashes"]))
    # And the rewritten event is in no tree the first checkpoint signed.
    body = api.get("/api/audit-events/6/inclusion-proof/?tree_size=10").json()
    assert not merkle.verify_inclusion(5, 10, leaf_of(6), decoded(body["hashes"]), old)


def test_an_append_refuses_to_grow_a_tree_that_lost_step_with_the_chain():
    append(3)  # size 3: two subtrees on the edge
    tamper_sql("UPDATE audit_chainhead SET tree_frontier = ''")
    with pytest.raises(RuntimeError, match="a log of 3 events has 2: events were appended"):
        append(1)
    assert AuditEvent.objects.count() == 3  # nothing written, nothing signed over a wrong tree
