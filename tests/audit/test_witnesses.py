"""Witnesses cosign our checkpoints over the C2SP tlog-witness protocol, against a stand-in that
checks what a real witness checks; failures raise alarms and never reach /mcp's path."""

import pytest

from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.models import Cosignature, DeliveryAlarm, WitnessState
from audit.services import audit_events_append
from audit.signed_note import cosignatures_by
from audit.witnesses import is_witnessed, witness_latest
from tests.audit.witness_standin import WitnessStandIn

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def manual_checkpoints(settings):
    settings.AUDIT_CHECKPOINT_EVERY = 10_000
    settings.AUDIT_CHECKPOINT_SECONDS = 3600
    settings.AUDIT_WITNESS_TIMEOUT_SECONDS = 1


@pytest.fixture
def witnesses(settings):
    log_key = current_signer().verifier
    with WitnessStandIn("w1.example", log_key) as one, WitnessStandIn("w2.example", log_key) as two:
        settings.AUDIT_WITNESSES = [one.setting(), two.setting()]
        settings.AUDIT_WITNESS_QUORUM = 2
        yield one, two


def checkpoint_after(n: int):
    audit_events_append(events=[{"action": "mcp.tools_list", "outcome": "allowed"}] * n)
    return checkpoint_create_if_due(force=True)


def test_each_checkpoint_is_cosigned_with_a_consistency_proof_from_the_last(witnesses):
    one, two = witnesses
    first = checkpoint_after(5)
    assert witness_latest("hyperbook") == {"w1.example": "cosigned", "w2.example": "cosigned"}
    second = checkpoint_after(11)
    assert witness_latest("hyperbook") == {"w1.example": "cosigned", "w2.example": "cosigned"}
    # The second request started from size 5 and carried the proof the stand-in checked.
    assert one.requests[0].startswith("old 0\n\n")
    assert one.requests[1].startswith("old 5\n") and one.requests[1].count("\n") > 3
    assert (one.size, two.size) == (16, 16)
    for checkpoint in (first, second):
        witnessed = cosignatures_by(checkpoint.witnessed_note(), [one.verifier, two.verifier])
        assert len(witnessed) == 2
        assert is_witnessed(checkpoint)
    states = {s.name: s.last_size for s in WitnessState.objects.all()}
    assert states == {"w1.example": 16, "w2.example": 16}
    # Asking again changes nothing: they have cosigned the latest.
    assert witness_latest("hyperbook") == {"w1.example": "cosigned", "w2.example": "cosigned"}
    assert len(one.requests) == 2


def test_a_409_with_the_witness_size_is_answered_with_a_proof_from_there(witnesses):
    one, _ = witnesses
    checkpoint_after(7)
    witness_latest("hyperbook")
    WitnessState.objects.update(last_size=0)  # our record is behind the witness's
    checkpoint_after(6)
    assert witness_latest("hyperbook")["w1.example"] == "cosigned"
    assert one.requests[-2].startswith("old 0\n") and one.requests[-1].startswith("old 7\n")
    assert one.size == 13


@pytest.mark.parametrize("mode", ["down", "slow", "forgetful"])
def test_a_failing_witness_raises_an_alarm_and_the_next_cosignature_clears_it(witnesses, mode):
    one, _ = witnesses
    one.mode = mode
    checkpoint = checkpoint_after(3)
    outcome = witness_latest("hyperbook")
    assert outcome == {"w1.example": "failed", "w2.example": "cosigned"}
    alarm = DeliveryAlarm.objects.get(cleared_at__isnull=True)
    assert alarm.kind == "witness:w1.example" and "witness w1.example" in alarm.message
    assert not is_witnessed(checkpoint)  # one of the two the quorum needs
    assert WitnessState.objects.get(name="w1.example").failing_since is not None
    one.mode = "honest"
    assert witness_latest("hyperbook")["w1.example"] == "cosigned"
    assert not DeliveryAlarm.objects.filter(cleared_at__isnull=True).exists()
    assert is_witnessed(checkpoint)


def test_a_rewritten_log_is_refused_by_the_witness(witnesses):
    from tests.audit.test_proofs import tamper_sql

    one, _ = witnesses
    checkpoint_after(8)
    witness_latest("hyperbook")
    # Someone regrows the tree over other history (its nodes and the head's edge of it), then
    # signs a checkpoint over it.
    tamper_sql("UPDATE audit_audittreenode SET hash = %s WHERE level = 3", ["22" * 32])
    tamper_sql("UPDATE audit_chainhead SET tree_frontier = %s", ["22" * 32])
    checkpoint_after(4)
    assert witness_latest("hyperbook")["w1.example"] == "failed"
    assert "answered 422" in WitnessState.objects.get(name="w1.example").last_problem
    assert one.size == 8  # it kept the history it had seen
    assert Cosignature.objects.filter(witness_key=one.verifier.text()).count() == 1


def test_a_reply_without_a_valid_cosignature_is_not_stored(witnesses, monkeypatch):
    one, _ = witnesses
    monkeypatch.setattr(one, "cosign", lambda text: one.__class__.cosign(one, text + "x"))
    checkpoint_after(2)
    assert witness_latest("hyperbook")["w1.example"] == "failed"
    assert "no valid cosignature" in WitnessState.objects.get(name="w1.example").last_problem
    assert not Cosignature.objects.filter(witness_key=one.verifier.text()).exists()


def test_the_verifiers_report_which_checkpoints_meet_the_quorum(witnesses, tmp_path, capsys):
    import io

    from django.core.management import call_command

    from audit.verify import main as verify_main

    one, two = witnesses
    checkpoint_after(4)
    witness_latest("hyperbook")
    two.mode = "down"
    checkpoint_after(3)
    witness_latest("hyperbook")
    keys = ["--witness-key", one.verifier.text(), "--witness-key", two.verifier.text()]
    expected = "witnessed (quorum 2 of 2): 1; not witnessed: 2"

    out = io.StringIO()
    call_command("verify_audit_chain", stdout=out)
    assert expected in out.getvalue()

    export = io.StringIO()
    call_command("export_audit", stdout=export, stderr=io.StringIO())
    path = tmp_path / "export.jsonl"
    path.write_text(export.getvalue())
    public = ["--public-key", current_signer().verifier.text()]
    assert verify_main([str(path), *public, *keys]) == 0  # without --quorum, only said
    assert "witnessed (quorum 1 of 2): 1, 2; not witnessed: none" in capsys.readouterr().out
    assert verify_main([str(path), *public, *keys, "--quorum", "2"]) == 1
    assert capsys.readouterr().err == (
        "FAILED at #5: events from #5 on are not witnessed: checkpoint 2 (#7), the last, has 1 of "
        f"the 2 cosignatures --quorum asks for; {expected}\n"
    )
    assert verify_main([str(path), *public, *keys[:2], "--quorum", "1"]) == 0
    assert "witnessed (quorum 1 of 1): 1, 2; not witnessed: none" in capsys.readouterr().out

    bundle = io.StringIO()
    call_command("export_audit", "--prove", "2", stdout=bundle, stderr=io.StringIO())
    path.write_text(bundle.getvalue())
    assert verify_main([str(path), *public, *keys, "--quorum", "2"]) == 1
    assert capsys.readouterr().err == (
        "FAILED at #2: event #2 is not witnessed: the checkpoint it is proven in (size 7) has 1 "
        "of the 2 cosignatures --quorum asks for; witnessed (quorum 2 of 2): none; not "
        "witnessed: the one at size 7\n"
    )
    assert verify_main([str(path), *public, *keys, "--quorum", "1"]) == 0


def test_verify_audit_chain_fails_while_the_latest_checkpoint_is_short_of_the_quorum(witnesses):
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    _, two = witnesses
    checkpoint_after(4)
    witness_latest("hyperbook")
    two.mode = "down"
    checkpoint_after(3)
    witness_latest("hyperbook")
    with pytest.raises(CommandError, match=r"^checkpoint 2, the latest, has 1 of the 2 witness"):
        call_command("verify_audit_chain", "--quorum", "2", stdout=io.StringIO())
    call_command("verify_audit_chain", "--quorum", "1", stdout=io.StringIO())
    with pytest.raises(CommandError, match="a quorum of 3 is more than the 2 witness keys in AUD"):
        call_command("verify_audit_chain", "--quorum", "3", stdout=io.StringIO())
    with pytest.raises(CommandError, match="a quorum of 0: it must be at least 1"):
        call_command("verify_audit_chain", "--quorum", "0", stdout=io.StringIO())
    # Once the second witness cosigns the latest, the quorum is met.
    two.mode = "honest"
    witness_latest("hyperbook")
    out = io.StringIO()
    call_command("verify_audit_chain", "--quorum", "2", stdout=out)
    assert "witnessed (quorum 2 of 2): 1, 2; not witnessed: none" in out.getvalue()


def test_verify_audit_chain_refuses_a_quorum_without_witnesses(settings):
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    settings.AUDIT_WITNESSES = []
    checkpoint_after(2)
    with pytest.raises(CommandError, match="a quorum of 1 is more than the 0 witness keys"):
        call_command("verify_audit_chain", "--quorum", "1", stdout=io.StringIO())


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("https://w.example/only-a-url", "write it as URL KEY"),
        ("ftp://w.example k", "write it as URL KEY"),
        ("https://w.example w+00000000+AA=A", "not valid base64"),
        ("https://w.example w+00000000+" + "A" * 44, "not an Ed25519 cosignature/v1 key"),
    ],
)
def test_a_witness_setting_that_cannot_be_read_is_an_error_at_start_up(settings, entry, says):
    from audit.apps import witnesses_check

    settings.AUDIT_WITNESSES = [entry]
    (error,) = witnesses_check(None)
    assert error.id == "audit.E002" and says in error.msg and "witness 1" in error.msg
