"""Our checkpoints and proofs, checked by an independent implementation: Go's
`golang.org/x/mod/sumdb/note` (signed notes) and `sumdb/tlog` (RFC 6962 proofs), from Debian's
golang-go and golang-golang-x-mod-dev, built in GOPATH mode with nothing downloaded."""

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.models import AuditEvent
from audit.services import audit_events_append
from audit.signed_note import Checkpoint
from audit.tree import tree_root

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

SOURCE = Path(__file__).parent / "go" / "checklog.go"
GOPATH = "/usr/share/gocode"  # where Debian's golang-*-dev packages put their sources
SUMDB = Path(GOPATH) / "src/golang.org/x/mod/sumdb"


@pytest.fixture(scope="module")
def checklog(tmp_path_factory):
    go = shutil.which("go")
    if go is None or not (SUMDB / "tlog").is_dir():
        reason = "Go or golang-golang-x-mod-dev is not installed (make test installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("go")
    binary = work / "checklog"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(work),
        "GO111MODULE": "off",
        "GOPATH": GOPATH,
        "GOCACHE": str(work / "cache"),
        "GOFLAGS": "",
        "GOPROXY": "off",
        "CGO_ENABLED": "0",
    }
    subprocess.run(
        [go, "build", "-o", str(binary), str(SOURCE)], env=env, check=True, timeout=300, cwd=work
    )
    return binary


def go_checks(binary, checks) -> list[str]:
    request = {"verifier_key": current_signer().verifier.text(), "checks": checks}
    result = subprocess.run(
        [str(binary)], input=json.dumps(request), capture_output=True, text=True, timeout=60
    )
    lines = result.stdout.splitlines()
    assert len(lines) == len(checks), result.stdout + result.stderr
    assert result.returncode == (0 if all(line == "ok" for line in lines) else 1)
    return lines


@pytest.fixture
def two_checkpoints(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10_000
    settings.AUDIT_CHECKPOINT_SECONDS = 3600

    def append(n):
        audit_events_append(
            events=[{"action": "mcp.tools_list", "outcome": "allowed"} for _ in range(n)]
        )

    append(13)
    first = checkpoint_create_if_due(force=True)
    append(24)
    second = checkpoint_create_if_due(force=True)
    return first, second


def entry(sequence: int) -> str:
    return AuditEvent.objects.get(sequence=sequence).hash


def inclusion_check(client, sequence, tree_size=None) -> dict:
    query = f"?tree_size={tree_size}" if tree_size else ""
    body = client.get(f"/api/audit-events/{sequence}/inclusion-proof/{query}").json()
    return {
        "kind": "inclusion",
        "note": body["checkpoint"],
        "entry": entry(sequence),
        "leaf_index": body["leaf_index"],
        "hashes": body["hashes"],
    }


def test_go_verifies_our_checkpoints_and_the_proofs_from_our_api(
    checklog, two_checkpoints, client, auditor
):
    first, second = two_checkpoints
    client.force_login(auditor)
    consistency = client.get("/api/audit-checkpoints/consistency-proof/?from=13&to=37").json()
    checks = [
        {"kind": "checkpoint", "note": first.note},
        {"kind": "checkpoint", "note": second.note},
        *(inclusion_check(client, sequence) for sequence in (1, 13, 14, 36, 37)),
        inclusion_check(client, 9, tree_size=13),
        {
            "kind": "consistency",
            "old_note": first.note,
            "note": second.note,
            "hashes": consistency["hashes"],
        },
    ]
    assert go_checks(checklog, checks) == ["ok"] * len(checks)


def test_go_catches_what_was_tampered_with(checklog, two_checkpoints, client, auditor):
    first, second = two_checkpoints
    client.force_login(auditor)
    good = inclusion_check(client, 20)
    changed_event = {**good, "entry": entry(21)}  # another event's hash in #20's place
    swapped = {**good, "hashes": [good["hashes"][1], good["hashes"][0], *good["hashes"][2:]]}
    body = second.note.split("\n\n")[0]
    forged_note = second.note.replace(body, body.replace("\n37\n", "\n36\n"))
    wrong_size = {**good, "note": forged_note}
    consistency = client.get("/api/audit-checkpoints/consistency-proof/?from=13&to=37").json()
    bent = base64.b64encode(bytes(32)).decode()
    rewritten_tail = {
        "kind": "consistency",
        "old_note": first.note,
        "note": second.note,
        "hashes": [*consistency["hashes"][:-1], bent],
    }
    # Signed by our key, but over the root of 36 events while claiming 37.
    root_of_36 = tree_root("hyperbook", 36).hex()
    mismatched = current_signer().sign(Checkpoint(second.origin, 37, root_of_36).body())
    size_off_tree = {**good, "note": mismatched}
    consistent_off_tree = {**rewritten_tail, "note": mismatched, "hashes": consistency["hashes"]}
    checks = [
        changed_event,
        swapped,
        wrong_size,
        rewritten_tail,
        size_off_tree,
        consistent_off_tree,
    ]
    results = go_checks(checklog, checks)
    assert all(line.startswith("FAILED") for line in results), results
    assert "invalid signature" in results[2], results[2]  # the edited note no longer verifies
    assert go_checks(checklog, [{"kind": "checkpoint", "note": mismatched}]) == ["ok"]


def test_go_catches_a_tail_rewritten_re_chained_and_re_treed(
    checklog, two_checkpoints, client, auditor
):
    from tests.audit.test_proofs import rewrite_tail

    first, second = two_checkpoints
    client.force_login(auditor)
    rewrite_tail(20)
    audit_events_append(events=[{"action": "mcp.tools_list", "outcome": "allowed"}])
    third = checkpoint_create_if_due(force=True)
    checks = [{"kind": "checkpoint", "note": third.note}]  # validly signed, over another history
    for old in (first, second):
        proof = client.get(
            f"/api/audit-checkpoints/consistency-proof/?from={old.sequence}&to=38"
        ).json()
        checks.append(
            {
                "kind": "consistency",
                "old_note": old.note,
                "note": third.note,
                "hashes": proof["hashes"],
            }
        )
    checks.append(inclusion_check(client, 20, tree_size=37) | {"note": second.note})
    results = go_checks(checklog, checks)
    assert results[0] == "ok"
    # From the first checkpoint (#13, before the rewrite) the history still agrees; from the
    # second (#37, which covered the rewritten events) it does not, nor does event #20's place.
    assert results[1] == "ok"
    assert results[2].startswith("FAILED") and results[3].startswith("FAILED"), results
