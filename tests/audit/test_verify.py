"""The standalone verifier of audit exports, on exports built here with the chain's functions."""

import base64
import datetime as dt
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

import audit.verify
from audit.chain import GENESIS_HASH, HASHED_FIELDS, event_hash, occurred_at_text
from audit.signed_note import Checkpoint, Signer, sign_checkpoint
from audit.verify import VerifyReport, load_verifiers, main, verify_export
from tests.audit.witness_standin import WitnessStandIn

ORIGIN = "example.org/audit/hyperbook"
KEY_NAME = "example.org/audit"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
KEY = Signer.generate(KEY_NAME)
START = dt.datetime(2026, 6, 30, 12, 0, 0, 123456, tzinfo=dt.UTC)


def chain_events(n: int) -> Iterable[dict]:
    """`n` linked events as an export writes them: request events, with every tenth an admin
    change holding Korean text and nested objects."""
    prev_hash = GENESIS_HASH
    for sequence in range(1, n + 1):
        event = {"type": "audit_event", **dict.fromkeys(HASHED_FIELDS, "")}
        event.update(
            id=str(uuid.UUID(int=sequence)),
            source="hyperbook",
            sequence=sequence,
            occurred_at=occurred_at_text(START + dt.timedelta(seconds=sequence)),
            action="mcp.tools_call",
            outcome="allowed",
            http_status=200,
            delegation_id=None,
            # Rounded to the three decimals the hash covers, as every writer rounds it.
            latency_ms=None if sequence % 3 == 0 else round(sequence / 7, 3),
            row_count=sequence % 50,
            masked_columns=["주민등록번호", "phone"] if sequence % 5 == 0 else [],
            prompt_length=None,
            changes={},
            prev_hash=prev_hash,
            client_request_id=f"req-{sequence}" if sequence % 4 == 0 else None,
        )
        if sequence % 10 == 0:
            event.update(
                action="registry.server_updated",
                outcome="changed",
                http_status=None,
                actor="관리자",
                target="kb_mcp",
                changes={
                    "이름": {"전": "홍길동", "후": "김철수"},
                    "설정": {"timeout": [1, 2.5, None], "열": {"깊이": True}},
                },
            )
        event["hash"] = event_hash(event)
        prev_hash = event["hash"]
        yield event


def checkpoint_line(number: int, event: dict, signer: Signer, origin: str = ORIGIN) -> dict:
    checkpoint = Checkpoint(origin, event["sequence"], event["hash"])
    return {
        "type": "audit_checkpoint",
        "number": number,
        "source": "hyperbook",
        "sequence": checkpoint.size,
        "hash": checkpoint.root_hash,
        "key_id": f"{signer.key_id:08x}",
        "created_at": event["occurred_at"],  # signed as the event it covers was written
        "note": sign_checkpoint(signer, checkpoint),
    }


def checkpoints_for(
    events: list[dict], every: int = 100, signer: Callable[[int], Signer] = lambda k: KEY
) -> list[dict]:
    at = [e for e in events if e["sequence"] % every == 0]
    return [checkpoint_line(k, event, signer(k)) for k, event in enumerate(at, 1)]


def write_export(
    path: Path, events: Iterable[dict], checkpoints: list[dict], *, first: int = 1, last: int
) -> Path:
    header = {
        "type": "hyperbook.audit_export",
        "version": 1,
        "source": "hyperbook",
        "origin": ORIGIN,
        "exported_at": "2026-07-01T00:00:00Z",
        "first_sequence": first,
        "last_sequence": last,
        "events": last - first + 1,
    }
    with open(path, "w", encoding="utf-8") as file:
        for record in (header, *events, *checkpoints) if isinstance(events, list) else (header,):
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
        if not isinstance(events, list):  # streamed: checkpoints are filled in as events pass
            for event in events:
                file.write(json.dumps(event, ensure_ascii=False) + "\n")
            for record in checkpoints:
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


@pytest.fixture
def events() -> list[dict]:
    return list(chain_events(1000))


@pytest.fixture
def export(tmp_path, events) -> Callable[..., Path]:
    """Writes the 1,000 events (as the test left them) with checkpoints every 100 signed by KEY
    over the events as they were, unless the test passes its own."""
    original = checkpoints_for(events)

    def write(checkpoints: list[dict] | None = None, name: str = "export.jsonl") -> Path:
        chosen = original if checkpoints is None else checkpoints
        first = events[0]["sequence"] if events else 1
        return write_export(tmp_path / name, events, chosen, first=first, last=1000)

    write.checkpoints = original
    return write


def verify(path: Path, *keys: Signer, origin: str | None = None) -> VerifyReport:
    verifiers = [k.verifier for k in keys] or [KEY.verifier]
    return verify_export(path, verifiers, origin=origin)


def assert_fails(report: VerifyReport, sequence: int, *words: str) -> None:
    assert not report.ok, report
    assert report.first_bad_sequence == sequence, report.message
    assert report.line().startswith(f"FAILED at #{sequence}: "), report.line()
    for word in words:
        assert word in report.message, report.message


def reseal(events: list[dict], start: int) -> None:
    """What someone without the key can do: recompute every hash and link from `start` on."""
    prev_hash = events[start - 2]["hash"] if start > 1 else GENESIS_HASH
    for event in events[start - 1 :]:
        event["prev_hash"] = prev_hash
        event["hash"] = event_hash(event)
        prev_hash = event["hash"]


def forge(line: dict, *, size: int | None = None, root_hash: str | None = None) -> dict:
    """The checkpoint line with its body changed and the old signature kept."""
    text, signatures = line["note"].split("\n\n")
    origin, old_size, root = text.split("\n")[:3]
    size = int(old_size) if size is None else size
    root = base64.b64encode(bytes.fromhex(root_hash)).decode() if root_hash else root
    note = f"{origin}\n{size}\n{root}\n\n{signatures}"
    return {**line, "note": note, "sequence": size, "hash": root_hash or line["hash"]}


# A clean export.


def test_a_clean_export_verifies(export):
    report = verify(export())
    assert report.ok, report.message
    assert (report.events, report.checkpoints) == (1000, 10)
    assert (report.first_sequence, report.last_sequence) == (1, 1000)
    assert report.line() == (
        f"ok: 1000 events #1..#1000, 10 checkpoints verified "
        f"(origin {ORIGIN}; keys {KEY_NAME}+{KEY.key_id:08x})"
    )


def test_the_generated_events_hold_what_real_events_hold(events):
    assert events[9]["changes"]["이름"]["후"] == "김철수"
    assert events[2]["latency_ms"] is None
    assert events[4]["masked_columns"] == ["주민등록번호", "phone"]
    assert events[3]["client_request_id"] == "req-4"


def test_the_command_prints_one_ok_line_and_exits_0(export, capsys):
    status = main([str(export()), "--public-key", KEY.verifier.text(), "--origin", ORIGIN])
    out, err = capsys.readouterr()
    assert status == 0
    assert out.startswith("ok: 1000 events #1..#1000, 10 checkpoints verified") and not err


def test_the_command_prints_one_failed_line_to_stderr_and_exits_1(export, events, capsys):
    events[41]["outcome"] = "forbidden"
    status = main([str(export()), "--public-key", KEY.verifier.text()])
    out, err = capsys.readouterr()
    assert status == 1
    assert not out
    assert err == "FAILED at #42: event #42 was altered: its hash does not recompute\n"


# Altered, deleted, swapped events.


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e.update(outcome="forbidden"),
        lambda e: e["changes"]["이름"].update(후="이몽룡"),
        lambda e: e["changes"]["설정"]["열"].update(깊이=False),
        lambda e: e.update(occurred_at="2026-06-30T12:07:51.123457Z"),
        lambda e: e.update(latency_ms=70.0),
        lambda e: e.update(masked_columns=[]),
        lambda e: e.update(client_request_id="req-other"),
        lambda e: e.update(prompt_length=0),
    ],
    ids=[
        "outcome",
        "nested korean",
        "deep value",
        "time",
        "latency",
        "masked",
        "request id",
        "null to 0",
    ],
)
def test_a_changed_field_names_the_altered_event(export, events, change):
    change(events[469])
    assert_fails(verify(export()), 470, "event #470 was altered")


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e.update(latency_ms=f"{e['latency_ms']}"),  # float("...") hashes the same
        lambda e: e.update(client_request_id=False),  # a falsy request id is not hashed
        lambda e: e.update(prompt_length=float("nan")),  # orjson hashes NaN as null
        lambda e: e.update(note="not covered by the hash"),
        lambda e: e.update(latency_ms=e["latency_ms"] + 0.0004),  # hashed to three decimals
        lambda e: e.update(client_request_id=""),  # hashed only when set, as null is
    ],
    ids=[
        "latency as text",
        "false request id",
        "NaN",
        "extra field",
        "latency's fourth decimal",
        "empty request id",
    ],
)
def test_a_change_the_hash_cannot_see_is_refused_by_shape(export, events, change):
    change(events[469])
    assert_fails(verify(export()), 470)


def test_a_latency_with_a_fourth_decimal_says_which_digits_its_hash_covers(export, events):
    assert events[469]["latency_ms"] == 67.143  # 470 / 7, as written
    events[469]["latency_ms"] = 67.1434
    assert event_hash(events[469]) == events[469]["hash"]  # the hash cannot see it
    report = verify(export())
    assert_fails(report, 470, "latency_ms has digits its hash does not cover (it hashes as 67.143)")


def test_a_number_too_large_for_a_float_is_refused_not_read_as_infinity(export):
    path = export()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[470] = lines[470].replace('"prompt_length": null', '"prompt_length": 1e400')
    path.write_text("".join(lines), encoding="utf-8")
    assert_fails(verify(path), 470, "line 471 is not valid JSON", "1e400 is out of range")


def test_an_altered_event_with_its_hash_recomputed_breaks_the_next_link(export, events):
    events[469]["outcome"] = "forbidden"
    events[469]["hash"] = event_hash(events[469])
    assert_fails(verify(export()), 471, "event #471 does not link to #470")


def test_a_deleted_event_is_named_missing(export, events):
    del events[499]
    assert_fails(verify(export()), 500, "missing event #500")


def test_a_deleted_first_event_is_named_missing(export, events):
    del events[0]
    assert_fails(verify(export()), 1, "missing event #1")


def test_two_swapped_events_name_the_first_position_out_of_order(export, events):
    events[499], events[500] = events[500], events[499]
    assert_fails(verify(export()), 500, "event #500 is out of order")


def test_a_repeated_event_is_out_of_order(export, events):
    events.insert(500, dict(events[499]))
    assert_fails(verify(export()), 501, "event #500 is out of order")


def test_a_line_that_is_not_json_is_named_with_the_next_sequence(export):
    path = export()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(300, "{not json\n")  # after the header and events #1..#299
    path.write_text("".join(lines), encoding="utf-8")
    assert_fails(verify(path), 300, "line 301 is not valid JSON")


# Truncation.


def test_a_file_cut_inside_the_event_lines_is_truncated_at_the_next_sequence(export):
    path = export()
    data = path.read_bytes()
    line_600 = data.index(b'"sequence": 600,')
    path.write_bytes(data[:line_600])
    assert_fails(verify(path), 600, "truncated", "cut short")


def test_a_file_cut_inside_a_multibyte_character_is_truncated(export):
    path = export()
    data = path.read_bytes()
    cut = data.index("김철수".encode(), data.index(b'"sequence": 600,')) + 1
    path.write_bytes(data[:cut])
    assert_fails(verify(path), 600, "truncated")


def test_a_file_cut_just_before_its_checkpoints_is_not_covered(export):
    path = export()
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b'{"type": "audit_checkpoint"')])
    assert_fails(verify(path), 1, "events from #1 on are not covered by a signed checkpoint")


def test_a_file_cut_inside_its_checkpoints_is_truncated_after_the_last_event(export):
    path = export()
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b'"number": 5,')])
    assert_fails(verify(path), 1001, "truncated")


def test_events_after_the_last_checkpoint_are_not_covered(export, events):
    extra = list(chain_events(1050))[1000:]
    events.extend(extra)
    assert_fails(verify(export()), 1001, "events from #1001 on are not covered")


def test_events_cut_after_a_checkpoint_are_missing(export, events):
    del events[950:]
    assert_fails(verify(export()), 951, "truncated", "events from #951 on are missing")


# Forged checkpoints and keys.


def test_a_checkpoint_with_a_changed_root_hash_does_not_verify(export, events):
    checkpoints = list(export.checkpoints)
    checkpoints[4] = forge(checkpoints[4], root_hash=events[0]["hash"])
    assert_fails(verify(export(checkpoints)), 500, "checkpoint 5", "does not verify")


def test_a_checkpoint_with_a_changed_size_does_not_verify_at_that_size(export):
    checkpoints = list(export.checkpoints)
    checkpoints[4] = forge(checkpoints[4], size=550)
    assert_fails(verify(export(checkpoints)), 550, "checkpoint 5", "does not verify")


def test_a_checkpoint_forged_beyond_the_last_event_does_not_verify(export):
    checkpoints = list(export.checkpoints)
    checkpoints[9] = forge(checkpoints[9], size=1200)
    assert_fails(verify(export(checkpoints)), 1200, "does not verify")


def test_a_checkpoints_convenience_fields_must_match_its_note(export):
    checkpoints = list(export.checkpoints)
    checkpoints[2] = {**checkpoints[2], "sequence": 310}
    assert_fails(verify(export(checkpoints)), 300, "sequence field")


def test_a_checkpoint_signed_by_an_unknown_key_says_so_with_its_key_id(export, events):
    stranger = Signer.generate(KEY_NAME)
    checkpoints = list(export.checkpoints)
    checkpoints[3] = checkpoint_line(4, events[399], stranger)
    report = verify(export(checkpoints))
    assert_fails(report, 400, "checkpoint 4", "unknown key", f"{stranger.key_id:08x}")


def test_a_checkpoint_of_another_origin_is_refused(export, events):
    checkpoints = list(export.checkpoints)
    checkpoints[6] = checkpoint_line(7, events[699], KEY, origin="example.org/audit/other")
    assert_fails(verify(export(checkpoints)), 700, "checkpoint 7", "example.org/audit/other")


def test_the_origin_asked_for_must_be_the_checkpoints(export):
    assert verify(export(), origin=ORIGIN).ok
    assert_fails(verify(export(), origin="example.org/audit/else"), 100, "checkpoint 1", "origin")


def test_events_rechained_by_someone_without_the_key_fail_at_the_next_checkpoint(export, events):
    events[299]["outcome"] = "forbidden"
    reseal(events, 300)
    assert_fails(verify(export()), 300, "event #300 does not match checkpoint 3")


def test_rechained_events_whose_checkpoints_were_dropped_are_not_covered(export, events):
    events[299]["outcome"] = "forbidden"
    reseal(events, 300)
    kept = [c for c in export.checkpoints if c["sequence"] < 300]
    assert_fails(verify(export(kept)), 201, "events from #201 on are not covered")


def test_rechained_events_with_checkpoints_signed_by_the_rechainer_are_refused(export, events):
    events[299]["outcome"] = "forbidden"
    reseal(events, 300)
    rechainer = Signer.generate(KEY_NAME)
    checkpoints = export.checkpoints[:2] + checkpoints_for(events, signer=lambda k: rechainer)[2:]
    assert_fails(verify(export(checkpoints)), 300, "unknown key")


# Exports starting mid-chain.


def test_an_export_starting_after_a_checkpoint_is_anchored_by_it(export, events):
    checkpoints = [c for c in export.checkpoints if c["sequence"] >= 300]
    del events[:300]
    report = verify(export(checkpoints))
    assert report.ok, report.message
    assert report.line().startswith("ok: 700 events #301..#1000, 8 checkpoints verified")


def test_an_export_starting_mid_chain_without_its_first_event_is_caught(export, events):
    checkpoints = [c for c in export.checkpoints if c["sequence"] >= 300]
    del events[:301]
    assert_fails(verify(export(checkpoints)), 301, "missing event #301")


def test_an_export_starting_mid_chain_without_its_anchor_is_caught(export, events):
    checkpoints = [c for c in export.checkpoints if c["sequence"] > 300]
    del events[:300]
    assert_fails(verify(export(checkpoints)), 1, "the export starts at #301")


def test_an_export_starting_after_a_checkpoint_it_does_not_link_to_is_caught(export, events):
    checkpoints = [c for c in export.checkpoints if c["sequence"] >= 300]
    del events[:300]
    events[0]["prev_hash"] = events[1]["hash"]
    events[0]["hash"] = event_hash(events[0])
    assert_fails(verify(export(checkpoints)), 301, "does not link to checkpoint 3")


# What a reader would misread: a key twice, unsigned fields that disagree, a header claiming more.


def with_a_key_twice(path: Path, line_number: int, key: str, first_value) -> Path:
    """The file with line `line_number` (1-based) given `key` a second time, before the real one:
    JSON keeps the last value, which the hash covers; grep and a reader see the first."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line_number - 1] = (
        "{" + f"{json.dumps(key)}: {json.dumps(first_value)}, " + (lines[line_number - 1][1:])
    )
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line_number", "key", "value", "sequence"),
    [
        (1 + 470, "outcome", "forbidden", 470),  # an event
        (1 + 1000 + 10, "sequence", 1010, 1001),  # a checkpoint line
        (1, "last_sequence", 2000, 1),  # the header
    ],
    ids=["event", "checkpoint", "header"],
)
def test_a_line_with_a_key_twice_is_refused(export, line_number, key, value, sequence):
    path = with_a_key_twice(export(), line_number, key, value)
    if line_number == 1:
        with pytest.raises(audit.verify.Unverifiable, match="first line is not the header"):
            verify(path)
        return
    assert_fails(verify(path), sequence, f"the key {key!r} appears twice")


@pytest.mark.parametrize(
    ("index", "change", "sequence", "words"),
    [
        (2, {"number": 9}, 300, "number field (9) is not checkpoint 2's + 1"),
        (2, {"key_id": "0badc0de"}, 300, "key_id field ('0badc0de') is not a key"),
        (2, {"source": "elsewhere"}, 300, "source field ('elsewhere') is not the header's"),
        (2, {"created_at": "yesterday"}, 300, "created_at field ('yesterday')"),
        (2, {"created_at": "2026-06-30T11:00:00.000000Z"}, 300, "created before checkpoint 2"),
        (0, {"created_at": "2026-06-30T11:00:00.000000Z"}, 100, "created before event #100"),
    ],
    ids=["number", "key id", "source", "time not a time", "time going back", "before its event"],
)
def test_a_checkpoint_lines_unsigned_fields_must_agree(export, index, change, sequence, words):
    checkpoints = [dict(c) for c in export.checkpoints]
    checkpoints[index].update(change)
    assert_fails(verify(export(checkpoints)), sequence, words)


def test_a_dropped_checkpoint_line_leaves_a_gap_in_the_numbers(export):
    checkpoints = [c for c in export.checkpoints if c["number"] != 3]
    assert_fails(verify(export(checkpoints)), 400, "checkpoint 4", "is not checkpoint 2's + 1")


@pytest.mark.parametrize(
    ("field", "value", "sequence", "words"),
    [
        ("first_sequence", 2, 1, "first_sequence (2) is not #1"),
        ("events", 999, 1001, "events (999) is not 1000"),
        ("source", "elsewhere", 1, "event #1 is of source 'hyperbook', not the header's"),
        ("origin", "example.org/audit/other", 1001, "are not the signed origin"),
    ],
)
def test_the_headers_source_origin_range_and_count_must_agree(
    export, field, value, sequence, words
):
    path = export()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header[field] = value
    lines[0] = json.dumps(header) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    assert_fails(verify(path, origin=ORIGIN), sequence, words)


def test_a_tail_cut_with_its_checkpoints_fails_when_the_header_claims_more(export, events):
    checkpoints = export.checkpoints[:5]
    del events[500:]
    assert_fails(
        verify(export(checkpoints)), 501, "truncated", "claims events up to #1000", "ends at #500"
    )


# What no export writes: keys nobody signs, a signature twice, lines out of their order, CR LF.


def rewrite_lines(path: Path, change: Callable[[list[bytes]], None]) -> Path:
    """The file with its lines (bytes, each with its line end) changed in place by `change`."""
    lines = path.read_bytes().splitlines(keepends=True)
    change(lines)
    path.write_bytes(b"".join(lines))
    return path


def rewrite_header(path: Path, change: Callable[[dict], None]) -> Path:
    def header(lines: list[bytes]) -> None:
        record = json.loads(lines[0])
        change(record)
        lines[0] = json.dumps(record).encode() + b"\n"

    return rewrite_lines(path, header)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda h: h.update(verified_by="the auditor"), "the header, holds 'verified_by'"),
        (lambda h: h.update(exported_at="yesterday"), "exported_at ('yesterday') is not a UTC"),
    ],
    ids=["unknown key", "time not a time"],
)
def test_a_header_with_a_field_no_export_writes_is_refused(export, change, words):
    assert verify(export()).ok
    assert_fails(verify(rewrite_header(export(), change)), 1, words)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"verified": True}, "checkpoint 3's line holds 'verified', which no export writes"),
        ({"head_hash": "ab" * 32}, "checkpoint 3's line holds 'head_hash' without the other"),
    ],
    ids=["unknown key", "half of the tree's fields"],
)
def test_a_checkpoint_line_with_a_field_no_export_writes_is_refused(export, change, words):
    checkpoints = [dict(c) for c in export.checkpoints]
    checkpoints[2].update(change)
    assert_fails(verify(export(checkpoints)), 300, words)


def test_a_signature_line_twice_is_refused(export):
    checkpoints = [dict(c) for c in export.checkpoints]
    signature_line = checkpoints[2]["note"].split("\n\n")[1]
    checkpoints[2]["note"] += signature_line
    assert_fails(
        verify(export(checkpoints)),
        300,
        f"checkpoint 3's note holds two signatures by {KEY_NAME} (key {KEY.key_id:08x})",
    )


def test_checkpoint_lines_out_of_order_are_refused_naming_the_line(export):
    checkpoints = list(export.checkpoints)
    checkpoints[2], checkpoints[3] = checkpoints[3], checkpoints[2]  # lines 1004 and 1005
    assert_fails(
        verify(export(checkpoints)),
        300,
        "line 1005: checkpoint 3 (#300) comes after checkpoint 4 (#400)",
        "out of order",
    )


@pytest.mark.parametrize(
    ("move", "sequence", "words"),
    [
        (lambda lines: lines.append(lines.pop(1000)), 1000, "line 1011 is an event after"),
        (lambda lines: lines.append(lines[500]), 1001, "line 1012 is an event after"),
    ],
    ids=["the last event moved", "an event repeated"],
)
def test_an_event_after_the_checkpoints_is_refused(export, move, sequence, words):
    path = rewrite_lines(export(), move)
    assert_fails(
        verify(path), sequence, words, "the checkpoints", "an export writes its events first"
    )


def test_crlf_line_ends_are_refused(export):
    path = export()
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert_fails(verify(path), 1, "line 1 holds a carriage return (CR LF line ends?)")


@pytest.mark.parametrize(
    ("index", "sequence", "words"),
    [
        (470, 470, "line 471 holds a carriage return"),  # event #470
        (1003, 300, "line 1004 holds a carriage return"),  # checkpoint 3
    ],
    ids=["event", "checkpoint"],
)
def test_one_crlf_line_is_refused_where_it_stands(export, index, sequence, words):
    def crlf(lines: list[bytes]) -> None:
        lines[index] = lines[index].replace(b"\n", b"\r\n")

    assert_fails(verify(rewrite_lines(export(), crlf)), sequence, words)


def test_blank_space_around_a_line_is_refused(export):
    def space(lines: list[bytes]) -> None:
        lines[470] = lines[470].replace(b"}\n", b"} \n")

    assert_fails(verify(rewrite_lines(export(), space)), 470, "line 471 has blank space")


def test_a_file_without_its_last_line_feed_is_truncated(export):
    path = export()
    path.write_bytes(path.read_bytes()[:-1])
    assert_fails(verify(path), 1000, "truncated: its last line (line 1011) is cut short")


# Witnesses and the quorum.

WITNESSES = [WitnessStandIn("w1.example", KEY.verifier), WitnessStandIn("w2.example", KEY.verifier)]
WITNESS_KEYS = [a for w in WITNESSES for a in ("--witness-key", w.verifier.text())]


def cosigned_by(line: dict, *witnesses: WitnessStandIn) -> dict:
    """The checkpoint line with each witness's cosignature line appended to its note."""
    text = line["note"].split("\n\n")[0] + "\n"
    cosignatures = "".join(w.cosign(text) + "\n" for w in witnesses)
    return {**line, "note": line["note"] + cosignatures}


def witnessed_export(export, last_by: tuple[WitnessStandIn, ...]) -> Path:
    """Every checkpoint cosigned by both witnesses, but the last (by `last_by`)."""
    checkpoints = [cosigned_by(c, *WITNESSES) for c in export.checkpoints]
    checkpoints[-1] = cosigned_by(export.checkpoints[-1], *last_by)
    return export(checkpoints)


def test_the_quorum_met_by_the_last_checkpoint_exits_0(export, capsys):
    path = witnessed_export(export, last_by=tuple(WITNESSES))
    assert (
        main([str(path), "--public-key", KEY.verifier.text(), *WITNESS_KEYS, "--quorum", "2"]) == 0
    )
    out = capsys.readouterr().out
    assert "witnessed (quorum 2 of 2): 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; not witnessed: none" in out


def test_a_last_checkpoint_short_of_the_quorum_exits_1(export, capsys):
    path = witnessed_export(export, last_by=(WITNESSES[0],))
    args = [str(path), "--public-key", KEY.verifier.text(), *WITNESS_KEYS]
    assert main([*args, "--quorum", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "FAILED at #901: events from #901 on are not witnessed: checkpoint 10 (#1000), the last, "
        "has 1 of the 2 cosignatures --quorum asks for; witnessed (quorum 2 of 2): 1, 2, 3, 4, 5, "
        "6, 7, 8, 9; not witnessed: 10"
    ), err
    assert main([*args, "--quorum", "1"]) == 0
    assert main(args) == 0  # without --quorum, only said
    assert "not witnessed: none" in capsys.readouterr().out


def test_a_cosignature_line_twice_is_refused_not_counted_twice(export):
    checkpoints = [cosigned_by(c, WITNESSES[0], WITNESSES[0]) for c in export.checkpoints]
    path = export(checkpoints)
    witness = WITNESSES[0].verifier
    report = verify_export(path, [KEY.verifier], witnesses=[witness], quorum=1)
    assert_fails(report, 100, "checkpoint 1's note holds two signatures by w1.example")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*WITNESS_KEYS, "--quorum", "3"], "a quorum of 3 is more than the 2 witness keys given"),
        ([*WITNESS_KEYS, "--quorum", "0"], "a quorum of 0: it must be at least 1"),
        (["--quorum", "1"], "a quorum of 1 is more than the 0 witness keys given"),
        ([*WITNESS_KEYS[:2], *WITNESS_KEYS[:2]], "--witness-key #2 repeats an earlier one"),
    ],
    ids=["more than the witnesses", "zero", "no witness", "a witness twice"],
)
def test_a_quorum_no_checkpoint_could_meet_is_a_usage_error(export, capsys, args, words):
    path = witnessed_export(export, last_by=tuple(WITNESSES))
    assert main([str(path), "--public-key", KEY.verifier.text(), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and len(err.splitlines()) == 1, err


# Key rotation.


def rotated(export, events) -> tuple[Path, Signer, Signer]:
    key_a, key_b = Signer.generate(KEY_NAME), Signer.generate(KEY_NAME)
    checkpoints = checkpoints_for(events, signer=lambda k: key_a if k <= 5 else key_b)
    return export(checkpoints), key_a, key_b


def test_rotated_keys_verify_when_the_old_one_is_given_with_its_range(export, events):
    path, key_a, key_b = rotated(export, events)
    report = verify_export(
        path, load_verifiers([f"{key_a.verifier.text()}@500", key_b.verifier.text()])
    )
    assert report.ok, report.message
    assert report.keys == (f"{KEY_NAME}+{key_a.key_id:08x}", f"{KEY_NAME}+{key_b.key_id:08x}")


def test_a_second_key_without_its_range_exits_2_naming_both(export, events, capsys):
    """Two keys without a range: one of them is retired, and would vouch for whatever it signs."""
    path, key_a, key_b = rotated(export, events)
    status = main(
        [str(path), "--public-key", key_a.verifier.text(), "--public-key", key_b.verifier.text()]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("error: 2 keys are given without @SIZE")
    assert f"+{key_a.key_id:08x}" in err and f"+{key_b.key_id:08x}" in err
    assert len(err.splitlines()) == 1
    with pytest.raises(audit.verify.Unverifiable, match="without @SIZE"):
        verify(path, key_a, key_b)


def test_a_retired_key_forged_beyond_its_range_fails_once_it_is_given_with_it(export, events):
    """The old key's holder re-signs the new key's checkpoints: given without its range (beside
    the current key) it is refused as a usage error; with its range, its checkpoint 6 fails."""
    path, key_a, key_b = rotated(export, events)
    checkpoints = checkpoints_for(events, signer=lambda k: key_a)
    forged = export(checkpoints, name="forged.jsonl")
    keys = [f"{key_a.verifier.text()}@500", key_b.verifier.text()]
    assert_fails(
        verify_export(forged, load_verifiers(keys)), 600, "checkpoint 6", "retired after #500"
    )
    assert verify_export(path, load_verifiers(keys)).ok


def test_a_key_given_twice_keeps_its_smaller_range(export):
    path = export()
    keys = [KEY.verifier.text(), f"{KEY.verifier.text()}@700", f"{KEY.verifier.text()}@500"]
    verifiers = load_verifiers(keys)
    assert [v.last_size for v in verifiers] == [500]
    assert_fails(verify_export(path, verifiers), 600, "retired after #500")


def test_with_only_the_old_key_the_first_checkpoint_of_the_new_one_fails(export, events):
    path, key_a, key_b = rotated(export, events)
    assert_fails(verify(path, key_a), 600, "checkpoint 6", "unknown key", f"{key_b.key_id:08x}")


def test_with_only_the_new_key_the_first_checkpoint_of_the_old_one_fails(export, events):
    path, key_a, key_b = rotated(export, events)
    assert_fails(verify(path, key_b), 100, "checkpoint 1", "unknown key", f"{key_a.key_id:08x}")


def test_a_retired_key_verifies_up_to_its_last_size(export, events):
    path, key_a, key_b = rotated(export, events)
    retired_a = f"{key_a.verifier.text()}@500"
    report = verify_export(path, load_verifiers([retired_a, key_b.verifier.text()]))
    assert report.ok, report.message


def test_a_retired_key_that_signs_beyond_its_last_size_is_refused(export, events):
    """Whoever kept the old key's private half re-signs the later checkpoints with it."""
    path = export(checkpoints_for(events, signer=lambda k: KEY))
    retired = load_verifiers([f"{KEY.verifier.text()}@500"])
    assert retired[0].last_size == 500
    assert_fails(verify_export(path, retired), 600, "checkpoint 6", "retired after #500")


def test_a_retired_keys_size_is_decimal(capsys):
    with pytest.raises(audit.verify.Unverifiable, match="is not a checkpoint size"):
        load_verifiers([f"{KEY.verifier.text()}@5x"])


def test_keys_can_come_from_a_file_with_comments(export, events, tmp_path, capsys):
    path, key_a, key_b = rotated(export, events)
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# 2026 rotation\n{key_a.verifier.text()}@500\n\n{key_b.verifier.text()}\n")
    assert main([str(path), "--public-key", f"@{keys}"]) == 0
    assert capsys.readouterr().out.startswith("ok: 1000 events")


# What cannot be verified at all.


def test_an_unreadable_file_exits_2_with_a_clear_message(tmp_path, capsys):
    status = main([str(tmp_path / "absent.jsonl"), "--public-key", KEY.verifier.text()])
    assert status == 2
    assert capsys.readouterr().err.startswith("error: cannot read ")


def test_a_bad_key_exits_2_without_echoing_it(export, capsys):
    status = main([str(export()), "--public-key", KEY.text()])  # the private key, by mistake
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("error: --public-key #1 is not a verifier key")
    assert KEY.text() not in err and "PRIVATE" not in err


def test_a_file_that_is_not_an_export_exits_2(tmp_path, capsys):
    path = tmp_path / "other.jsonl"
    path.write_text('{"hello": "world"}\n')
    assert main([str(path), "--public-key", KEY.verifier.text()]) == 2
    assert "not a hyperbook audit export" in capsys.readouterr().err


def test_an_empty_file_exits_2(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert main([str(path), "--public-key", KEY.verifier.text()]) == 2
    assert "the file is empty" in capsys.readouterr().err


def test_an_empty_key_file_exits_2(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# none yet\n")
    with pytest.raises(audit.verify.Unverifiable, match="holds no key"):
        load_verifiers([f"@{keys}"])


# Standalone: no Django, no orjson, no site-packages.


def standalone_path(tmp_path: Path) -> list[str]:
    """The project root and a folder holding only what `cryptography` needs to import."""
    import cryptography

    site = Path(cryptography.__file__).parent.parent
    deps = tmp_path / "deps"
    deps.mkdir()
    for item in ["cryptography", "cffi", *(p.name for p in site.glob("_cffi_backend*"))]:
        if (site / item).exists():
            (deps / item).symlink_to(site / item)
    return [str(PROJECT_ROOT), str(deps)]


def run_standalone(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    if not (tmp_path / "deps").exists():
        standalone_path(tmp_path)
    code = (
        "import sys, importlib.util, runpy\n"
        f"sys.path[:0] = {[str(PROJECT_ROOT), str(tmp_path / 'deps')]!r}\n"
        "assert importlib.util.find_spec('django') is None, 'django is importable'\n"
        "assert importlib.util.find_spec('orjson') is None, 'orjson is importable'\n"
        f"sys.argv = ['audit.verify', *{list(args)!r}]\n"
        "runpy.run_module('audit.verify', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_the_verifier_runs_without_django_or_site_packages(export, events, tmp_path):
    good = export(name="good.jsonl")
    result = run_standalone(tmp_path, str(good), "--public-key", KEY.verifier.text())
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("ok: 1000 events #1..#1000, 10 checkpoints verified")

    events[99]["changes"] = {"몰래": "바꿈"}
    bad = export(name="bad.jsonl")
    result = run_standalone(tmp_path, str(bad), "--public-key", KEY.verifier.text())
    assert result.returncode == 1
    assert result.stderr == "FAILED at #100: event #100 was altered: its hash does not recompute\n"


# Bounded memory.


MEASURE = """
import json, resource, sys
from audit.verify import load_verifiers, verify_export
verifiers = load_verifiers([sys.argv[2]])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = verify_export(sys.argv[1], verifiers)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"ok": report.ok, "events": report.events, "growth": (after - before) * 1024}))
"""


@pytest.mark.slow
def test_verifying_a_large_export_keeps_memory_bounded(tmp_path):
    """200,000 events make a file of about 160 MB, which held in memory as dicts would take
    several times that. The verifier keeps the previous hash, the checkpoint lines (a few hundred
    bytes each) and one line at a time, so its peak resident memory grows by less than 16 MB
    while it verifies (it is measured in its own process, after its imports)."""
    n, every = 200_000, 10_000
    checkpoints = []

    def streamed() -> Iterable[dict]:
        for event in chain_events(n):
            if event["sequence"] % every == 0:
                checkpoints.append(checkpoint_line(len(checkpoints) + 1, event, KEY))
            yield event

    path = write_export(tmp_path / "large.jsonl", streamed(), checkpoints, last=n)
    size = path.stat().st_size
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), KEY.verifier.text()],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=300,
        check=True,
    )
    measured = json.loads(result.stdout)
    assert measured["ok"] and measured["events"] == n
    assert size > 100_000_000
    assert measured["growth"] < 16_000_000, f"grew {measured['growth']} bytes for {size} bytes"
