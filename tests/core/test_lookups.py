"""A compiled lookup answers exactly what its queryset answers, reads afresh every time, and
compiles once per database connection."""

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.lookups import CompiledLookup
from core.tokens import token_fingerprint
from kb.models import Stakeholder
from registry.models import TokenDelegation
from registry.services import delegation_issue, delegation_revoke

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

COLUMNS = ("pk", "expires_at", "revoked_at", "tools", "audience", "stakeholder__role")


def by_fingerprint(fingerprint):
    return TokenDelegation.objects.filter(fingerprint=fingerprint).values_list(*COLUMNS)


@pytest.fixture
def delegation():
    call_command("load_kb_demo", verbosity=0)
    planner = Stakeholder.objects.get(pk="KB-P-001")
    return delegation_issue(
        stakeholder=planner,
        agent_name="lookup tests",
        expires_at=timezone.now() + timedelta(hours=1),
        tools=["ords.query.kb_select_ai_vpd", "other.tool"],
    )


def test_the_row_and_its_values_are_the_orms(delegation):
    record, token = delegation
    lookup = CompiledLookup(TokenDelegation, by_fingerprint)
    row = lookup.one(token_fingerprint(token))
    assert row == by_fingerprint(token_fingerprint(token)).get()
    # Converted as the ORM converts: an aware datetime and decoded JSON, not text.
    assert row[1].tzinfo is not None and row[1] == record.expires_at
    assert row[3] == ["ords.query.kb_select_ai_vpd", "other.tool"]
    assert lookup.one(token_fingerprint("hb_vpd_not-a-token")) is None


def test_every_call_reads_the_database(delegation):
    record, token = delegation
    lookup = CompiledLookup(TokenDelegation, by_fingerprint)
    assert lookup.one(token_fingerprint(token))[2] is None
    delegation_revoke(delegation=record, reason="lookup test")
    with CaptureQueriesContext(connection) as queries:
        revoked_at = lookup.one(token_fingerprint(token))[2]
    assert revoked_at is not None, "a revocation shows at the very next lookup"
    assert len(queries) == 1


def test_compiled_once_per_connection(delegation):
    _, token = delegation
    compiled = []
    lookup = CompiledLookup(
        TokenDelegation, lambda key: compiled.append(key) or by_fingerprint(key)
    )
    for _ in range(5):
        assert lookup.one(token_fingerprint(token)) is not None
    assert len(compiled) == 1

    rows, errors = [], []

    def in_another_thread():
        try:
            rows.append(lookup.one(token_fingerprint(token)))
        except Exception as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=in_another_thread)
    thread.start()
    thread.join(timeout=30)
    assert not errors and rows and rows[0][0] == delegation[0].pk
    assert len(compiled) == 2, "another thread's connection compiles its own"


def test_a_lookup_must_use_its_key_once_and_take_a_string(delegation):
    no_key = CompiledLookup(TokenDelegation, lambda key: TokenDelegation.objects.values_list("pk"))
    with pytest.raises(ValueError, match="exactly once"):
        no_key.one("anything")
    lookup = CompiledLookup(TokenDelegation, by_fingerprint)
    with pytest.raises(TypeError):
        lookup.one(42)
