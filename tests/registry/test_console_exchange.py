"""A console exchange against a real /mcp process: one exchange id on all its audit events, the
audit list of exactly them, and the raw JSON-RPC view, never with the bearer."""

import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Max
from django.test import Client

from audit.models import AuditEvent
from registry.models import ConsoleTurn
from registry.presets import write_token_presets

pytestmark = [pytest.mark.db, pytest.mark.slow]

PROMPT = "담당 고객의 보험료 상세를 보여줘"
PIN_ACTIONS = {AuditEvent.Action.TOOL_PINNED, AuditEvent.Action.TOOL_PIN_APPROVED}


@pytest.fixture
def console(server, world, settings, tmp_path, django_db_blocker):
    presets = tmp_path / "presets.json"
    write_token_presets(presets, {"KB-P-001": world.tokens["KB-P-001"]})
    settings.VPD_TOKEN_PRESETS_FILE = presets
    settings.KB_MCP_BASE_URL = server.url
    with django_db_blocker.unblock():
        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        user, _ = User.objects.get_or_create(
            username="exchange-admin", is_staff=True, is_superuser=True
        )
        client = Client()
        client.force_login(user)
        yield client, user


def run(client, **data):
    payload = {"server": "kb_mcp", "stakeholder": "", "one_time_bearer": "", "limit": "5"}
    return client.post("/admin/registry/consoleturn/", {**payload, **data})


def last_sequence() -> int:
    return AuditEvent.objects.aggregate(last=Max("sequence"))["last"] or 0


def listed(body: str) -> set[str]:
    return set(re.findall(r"/admin/audit/auditevent/([0-9a-f-]{36})/change/", body))


def test_every_audit_event_of_a_call_carries_its_exchange_id_and_the_list_shows_exactly_them(
    console, django_db_blocker
):
    client, user = console
    with django_db_blocker.unblock():
        before = last_sequence()
        page = run(client, stakeholder="KB-P-001", prompt=PROMPT, action="call").content.decode()
        turn = ConsoleTurn.objects.filter(user=user).latest("created_at")
        new = list(AuditEvent.objects.filter(sequence__gt=before))
        listing = client.get("/admin/audit/auditevent/", {"exchange": turn.exchange_id})
        other = run(client, stakeholder="KB-P-001", action="discover")
        second = ConsoleTurn.objects.filter(user=user).latest("created_at")

    assert turn.status == "ok" and re.fullmatch(r"[0-9a-f]{32}", turn.exchange_id)
    linked = [e for e in new if e.client_request_id == turn.exchange_id]
    # Pins are the registry's own decisions, not messages of the exchange.
    assert {e.action for e in new if e not in linked} <= PIN_ACTIONS
    assert sorted(e.rpc_method for e in linked if e.action.startswith("mcp.")) == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "tools/list",
    ]
    [own] = [e for e in linked if e.action == AuditEvent.Action.CONSOLE_CALL]
    assert own.request_id == turn.request_id  # the server's own id of the tools/call request
    assert len({e.request_id for e in linked if e.action.startswith("mcp.")}) == 4

    assert listing.status_code == 200
    assert listed(listing.content.decode()) == {str(e.pk) for e in linked}

    assert f'href="/admin/audit/auditevent/?exchange={turn.exchange_id}"' in page
    assert second.exchange_id != turn.exchange_id
    assert other.status_code == 200


def test_the_raw_view_shows_the_exchange_as_sent_and_received_on_the_console_and_the_turn_page(
    console, django_db_blocker
):
    client, user = console
    with django_db_blocker.unblock():
        page = run(client, stakeholder="KB-P-001", prompt=PROMPT, action="call").content.decode()
        turn = ConsoleTurn.objects.filter(user=user).latest("created_at")
        turn_page = client.get(f"/admin/registry/consoleturn/{turn.pk}/change/").content.decode()
    assert [(m["direction"], m["method"]) for m in turn.transcript] == [
        ("sent", "initialize"),
        ("received", "initialize"),
        ("sent", "notifications/initialized"),
        ("received", "notifications/initialized"),
        ("sent", "tools/list"),
        ("received", "tools/list"),
        ("sent", "tools/call"),
        ("received", "tools/call"),
    ]
    for body in (page, turn_page):
        raw = body[body.index('<details id="raw-jsonrpc">') :]
        raw = raw[: raw.index("</details>")]
        assert "원본 JSON-RPC 보기" in raw
        assert "&quot;tools/call&quot;" in raw and PROMPT in raw
        assert "HTTP 202" in raw  # notifications/initialized: accepted, no answer
        assert 'id="exchange-events"' in body


def test_the_bearer_is_in_no_transcript_page_or_audit_row_even_when_pasted_into_the_question(
    console, world, django_db_blocker
):
    client, user = console
    canary = world.tokens["KB-P-001"]
    with django_db_blocker.unblock():
        before = last_sequence()
        page = run(
            client,
            one_time_bearer=canary,
            stakeholder="KB-P-001",
            prompt=f"{PROMPT} {canary}",
            action="call",
        ).content.decode()
        turn = ConsoleTurn.objects.filter(user=user).latest("created_at")
        turn_page = client.get(f"/admin/registry/consoleturn/{turn.pk}/change/").content.decode()
        listing = client.get("/admin/audit/auditevent/", {"exchange": turn.exchange_id})
        rows = list(AuditEvent.objects.filter(sequence__gt=before).values())
        kept = list(ConsoleTurn.objects.filter(pk=turn.pk).values())
    assert turn.transcript and rows and turn.exchange_id
    assert any(m["method"] == "tools/call" and "[redacted]" in m["text"] for m in turn.transcript)
    # The form gives the typed question back to whoever typed it; the rest of the page must not.
    shown = re.sub(r'<form[^>]*id="console-form".*?</form>', "", page, flags=re.S)
    assert "console-form" not in shown and 'id="raw-jsonrpc"' in shown
    for text in (repr(kept), shown, turn_page, listing.content.decode(), repr(rows)):
        assert canary not in text
        assert canary.split("_", 1)[1] not in text  # nor its secret part alone
