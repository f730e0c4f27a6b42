"""Exports that keep the proof: chain fields on every event, the checkpoints that cover them."""

import base64
import io
import json
import tracemalloc

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from audit import merkle
from audit.chain import GENESIS_HASH, event_hash
from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.export import export_jsonl, provable_range, requested_range
from audit.models import AuditCheckpoint, AuditEvent, AuditTreeNode, ChainHead, uuid7
from audit.services import audit_events_append, audit_record
from audit.signed_note import open_checkpoint
from audit.verify import verify_export

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_10(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10
    settings.AUDIT_CHECKPOINT_SECONDS = 3600


def append(n: int) -> None:
    audit_events_append(
        events=[
            {
                "action": "mcp.tools_call",
                "outcome": "allowed",
                "http_status": 200,
                "stakeholder_id": "KB-P-001",
                "tool": "ords.query.kb_select_ai_vpd",
                "client_address": "127.0.0.1",
                "latency_ms": 1.5 + i,
                "masked_columns": ["rrn"],
            }
            for i in range(n)
        ]
    )


def export(*args) -> list[dict]:
    out, err = io.StringIO(), io.StringIO()
    call_command("export_audit", *args, stdout=out, stderr=err)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def chain_with_checkpoints(batches: int = 5, size: int = 10) -> None:
    for _ in range(batches):
        append(size)
        checkpoint_create_if_due()


def test_every_event_carries_its_chain_and_the_checkpoints_follow():
    chain_with_checkpoints()
    audit_record(action="registry.server_created", outcome="changed", changes={"이름": "KB"})
    lines = export()
    header, events = lines[0], [x for x in lines if x["type"] == "audit_event"]
    checkpoints = [x for x in lines if x["type"] == "audit_checkpoint"]
    assert header["type"] == "hyperbook.audit_export" and header["version"] == 1
    assert [e["sequence"] for e in events] == list(range(1, 52))
    assert events[0]["prev_hash"] == GENESIS_HASH
    for previous, event in zip(events, events[1:], strict=False):
        assert event["prev_hash"] == previous["hash"]
    for event in events:  # each line alone recomputes its hash
        assert event_hash({k: v for k, v in event.items() if k != "type"}) == event["hash"]
    assert lines[-len(checkpoints) :] == checkpoints  # after every event
    # The range reached past the last checkpoint: one was signed for the export's end.
    assert checkpoints[-1]["sequence"] == 51
    verifier = current_signer().verifier
    for line in checkpoints:
        signed = open_checkpoint(line["note"], [verifier])
        leaf = merkle.leaf_hash(bytes.fromhex(events[signed.size - 1]["hash"]))
        proof = [base64.b64decode(h) for h in line["head_proof"]]
        root = bytes.fromhex(signed.root_hash)
        assert line["head_hash"] == events[signed.size - 1]["hash"]
        assert merkle.verify_inclusion(signed.size - 1, signed.size, leaf, proof, root)
        hashes = [bytes.fromhex(e["hash"]) for e in events[: signed.size]]
        assert merkle.root_of(merkle.leaf_hash(h) for h in hashes) == root


def test_a_partial_export_is_widened_to_the_checkpoints_around_it():
    chain_with_checkpoints()  # checkpoints at 10, 20, 30, 40, 50
    lines = export("--after-sequence", "24")
    events = [x for x in lines if x["type"] == "audit_event"]
    sizes = [x["sequence"] for x in lines if x["type"] == "audit_checkpoint"]
    assert events[0]["sequence"] == 21  # right after checkpoint #20, which is in the file
    assert events[0]["prev_hash"] == AuditCheckpoint.objects.get(sequence=20).head_hash
    assert sizes == [20, 30, 40, 50] and events[-1]["sequence"] == 50
    assert AuditCheckpoint.objects.count() == 5  # #50 was already covered: nothing new signed


def test_time_bounds_select_sequences():
    chain_with_checkpoints(batches=2)
    everything = requested_range()
    assert (everything.first, everything.last) == (1, 20)
    assert requested_range(after_sequence=20).first > requested_range(after_sequence=20).last
    nothing = export("--since", "2999-01-01")
    assert len(nothing) == 1 and nothing[0]["events"] == 0  # the header only
    with pytest.raises(CommandError):
        call_command("export_audit", "--since", "yesterday-ish", stdout=io.StringIO())


def test_ocsf_maps_to_api_activity_and_keeps_the_chain_in_unmapped():
    chain_with_checkpoints(batches=1)
    audit_record(action="registry.delegation_revoked", outcome="changed", actor="admin")
    lines = export("--format", "ocsf")
    assert len(lines) == 11  # events only, exactly the asked range
    call = lines[0]
    assert (call["class_uid"], call["category_uid"], call["activity_id"]) == (6003, 6, 2)
    assert call["type_uid"] == 600302 and call["status_id"] == 1
    assert call["src_endpoint"] == {"ip": "127.0.0.1"}
    assert call["actor"]["user"]["uid"] == "KB-P-001"
    assert call["metadata"]["sequence"] == 1 and call["metadata"]["version"] == "1.3.0"
    revoked = lines[-1]
    assert (revoked["activity_id"], revoked["type_uid"]) == (4, 600304)
    for line in lines:
        unmapped = line["unmapped"]
        assert {"sequence", "prev_hash", "hash", "source"} <= unmapped.keys()
        assert event_hash(unmapped) == unmapped["hash"]


@pytest.mark.slow  # 100,000 rows
def test_an_export_of_100000_events_streams_in_bounded_memory():
    # Rows written straight in (hashes not chained: this is about memory, and chaining 100,000
    # events through the append path costs half a minute); a checkpoint over them ends the range.
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                id=uuid7(),
                sequence=sequence,
                occurred_at=now,
                action="mcp.tools_call",
                outcome="allowed",
                stakeholder_id="KB-P-001",
                tool="ords.query.kb_select_ai_vpd",
                masked_columns=["rrn"],
                prev_hash=f"{sequence - 1:064x}",
                hash=f"{sequence:064x}",
            )
            for sequence in range(1, 100_001)
        ],
        batch_size=5000,
    )
    frontier, nodes = [], []
    for size in range(100_000):
        leaf = merkle.leaf_hash(bytes.fromhex(f"{size + 1:064x}"))
        for level, index, value in merkle.frontier_append(frontier, size, leaf):
            nodes.append(
                AuditTreeNode(source="hyperbook", level=level, index=index, hash=value.hex())
            )
    AuditTreeNode.objects.bulk_create(nodes, batch_size=5000)
    ChainHead.objects.create(
        source="hyperbook",
        last_sequence=100_000,
        last_hash=f"{100_000:064x}",
        tree_frontier=merkle.frontier_hex(frontier),
    )
    span = provable_range(requested_range())

    class Counting:
        size = lines = 0

        def write(self, text):
            self.size += len(text)
            self.lines += 1

    out = Counting()
    tracemalloc.start()
    try:
        written = export_jsonl(out, span)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written == 100_000 and out.lines == 100_000 + 2  # header, events, one checkpoint
    # Holding the events would take more than the output's size; a chunk of rows is all we hold.
    assert peak < 16 * 1024 * 1024, peak
    assert peak < out.size / 4, (peak, out.size)


def test_an_export_proves_itself_to_the_standalone_verifier(tmp_path):

    chain_with_checkpoints()
    audit_record(action="registry.server_created", outcome="changed", changes={"이름": "KB"})
    for args, first in (((), 1), (("--after-sequence", "33"), 31)):
        path = tmp_path / "audit.jsonl"
        with path.open("w") as out:
            call_command("export_audit", *args, stdout=out, stderr=io.StringIO())
        report = verify_export(path, [current_signer().verifier])
        assert report.ok, report.message
        assert (report.first_sequence, report.last_sequence) == (first, 51)
    # One changed field in the database's export is caught, at its sequence.
    lines = path.read_text().splitlines()
    event = json.loads(lines[5])
    event["tool"] = "something.else"
    lines[5] = json.dumps(event, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n")
    report = verify_export(path, [current_signer().verifier])
    assert not report.ok and report.first_bad_sequence == event["sequence"]


def _edit(index: int, change):
    """A tamper that changes line `index` (0-based) of the export as a JSON object."""

    def tamper(lines: list[bytes]) -> None:
        record = json.loads(lines[index])
        change(record)
        lines[index] = json.dumps(record, ensure_ascii=False).encode() + b"\n"

    return tamper


def _signature_twice(record: dict) -> None:
    record["note"] += record["note"].split("\n\n")[1]


def _swap(lines: list[bytes]) -> None:
    lines[-3], lines[-2] = lines[-2], lines[-3]


# What export_audit writes: the header (line 0), events #1..#51 (lines 1..51), six checkpoints.
_TAMPERS = {
    "crlf": (lambda lines: lines.__setitem__(slice(None), [x[:-1] + b"\r\n" for x in lines]), 1),
    "header key": (_edit(0, lambda r: r.update(checked=True)), 1),
    "checkpoint key": (_edit(-1, lambda r: r.update(witnessed=True)), 51),
    "signature twice": (_edit(-2, _signature_twice), 50),
    "checkpoints reordered": (_swap, 40),
    "event after the checkpoints": (lambda lines: lines.append(lines.pop(51)), 51),
    "latency's fourth decimal": (_edit(51, lambda r: r.update(latency_ms=1234.5684)), 51),
}


@pytest.mark.parametrize("tamper", list(_TAMPERS), ids=list(_TAMPERS))
def test_an_export_tampered_where_its_hashes_and_signatures_cannot_see_is_refused(tmp_path, tamper):
    chain_with_checkpoints()
    # As /mcp records it: rounded to the three decimals the hash covers.
    audit_events_append(events=[{"action": "mcp.tools_call", "latency_ms": round(1234.56789, 3)}])
    path = tmp_path / "audit.jsonl"
    with path.open("w") as out:
        call_command("export_audit", stdout=out, stderr=io.StringIO())
    verifiers = [current_signer().verifier]
    assert verify_export(path, verifiers).ok
    change, sequence = _TAMPERS[tamper]
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 1 + 51 + 6
    change(lines)
    path.write_bytes(b"".join(lines))
    report = verify_export(path, verifiers)
    assert not report.ok and report.first_bad_sequence == sequence, report.message
