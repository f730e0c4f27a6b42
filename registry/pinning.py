"""Tool pinning: a tool's definition is trusted on first discovery; a later change is held for
an admin to review and approve (a defence against a server changing a tool under its callers)."""

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_change
from registry.models import McpServer, ToolPin

PINNED = "pinned"  # first seen now, pinned automatically (trust on first use)
UNCHANGED = "unchanged"
HELD = "held"  # differs from the pin, or never approved: calls wait for an admin
UNREGISTERED = "unregistered"  # not a registered server: nothing stored, nothing to compare


def pin_state_label(state: str) -> str:
    """A pin state in words."""
    labels = {
        PINNED: _("처음 보아 고정함"),
        UNCHANGED: _("고정된 정의와 같음"),
        HELD: _("정의가 바뀌어 승인 대기"),
        UNREGISTERED: _("등록되지 않은 서버 (비교하지 않음)"),
    }
    return str(labels.get(state, state))


# A server listing more tools than this is refused rather than given that many rows to fill.
MAX_TOOLS_PER_SERVER = 100


class PinError(ValueError):
    """An approval could not be applied; the message is safe to show."""


class TooManyTools(PinError):
    """The server lists more tools than MAX_TOOLS_PER_SERVER."""


def canonical_tool_definition(definition: Mapping) -> dict:
    """The pinned form of a tool definition: all of it (name, title, description, schemas,
    annotations, icons, _meta and whatever else a client may show or act on), as plain JSON."""
    return json.loads(_canonical_json(definition))


def tool_definition_hash(definition: Mapping) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the whole definition."""
    return hashlib.sha256(_canonical_json(definition).encode()).hexdigest()


def _canonical_json(definition: Mapping) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class PinCheck:
    state: str
    pin: ToolPin | None = None


def tool_pins_check(
    *, server: McpServer | None, definitions: list[dict], trust_first_use: bool, actor=None
) -> dict[str, PinCheck]:
    """Compare every tool a server lists with its pin, by name.

    - A server with no pins yet: its tools are pinned as they are (trust on first use), but only
      when `trust_first_use` says the asker may make that decision (an admin holding
      `registry.approve_toolpin`, or an operator at the server's own terminal). Otherwise they
      are quarantined like any new tool.
    - A tool name never seen on a server that has pins is quarantined (pending, never approved),
      so renaming a tool does not dodge its pin.
    - A definition other than the pinned one is kept as pending (the newest one seen).
    Held and quarantined tools cannot be called until an admin approves them. Pins and their
    audit events commit together.
    """
    if server is None:
        return {
            d["name"]: PinCheck(UNREGISTERED)
            for d in definitions
            if isinstance(d.get("name"), str)  # as below: a nameless definition is not a tool
        }
    if len(definitions) > MAX_TOOLS_PER_SERVER:
        raise TooManyTools(_("MCP 서버가 도구를 너무 많이 제공합니다."))
    checks: dict[str, PinCheck] = {}
    with transaction.atomic():
        # One pin decision per server at a time: lock the server row, then read its pins.
        McpServer.objects.select_for_update().filter(pk=server.pk).first()
        pins = {p.tool_name: p for p in ToolPin.objects.filter(server=server)}
        first_use = not pins and trust_first_use
        for definition in definitions:
            name = definition.get("name")
            if not isinstance(name, str) or name in checks:
                continue
            checks[name] = _check_one(server, name, definition, pins.get(name), first_use, actor)
    return checks


def tool_pin_check(
    *, server: McpServer | None, tool_name: str, definition: dict, trust_first_use: bool, actor=None
) -> PinCheck:
    """`tool_pins_check` for a server that lists this one tool."""
    return tool_pins_check(
        server=server, definitions=[definition], trust_first_use=trust_first_use, actor=actor
    )[tool_name]


def _check_one(server, name, definition, pin, first_use: bool, actor) -> PinCheck:
    canonical = canonical_tool_definition(definition)
    digest = tool_definition_hash(definition)
    target = f"{server.server_id}:{name}"
    if pin is None and first_use:
        pin = ToolPin.objects.create(
            server=server,
            tool_name=name,
            definition_hash=digest,
            definition=canonical,
            pinned_at=timezone.now(),
        )
        audit_change(
            action=AuditEvent.Action.TOOL_PINNED,
            actor=actor,
            target=target,
            before=None,
            after={"definition_hash": digest},
        )
        return PinCheck(PINNED, pin)
    if pin is None:
        pin = ToolPin.objects.create(
            server=server,
            tool_name=name,
            definition_hash="",
            definition=None,
            pending_hash=digest,
            pending_definition=canonical,
            changed_at=timezone.now(),
        )
        audit_change(
            action=AuditEvent.Action.TOOL_QUARANTINED,
            actor=actor,
            target=target,
            before=None,
            after={"pending_hash": digest},
        )
        return PinCheck(HELD, pin)
    if pin.definition_hash == digest:
        return PinCheck(UNCHANGED, pin)
    if pin.pending_hash != digest:
        before = {"definition_hash": pin.definition_hash, "pending_hash": pin.pending_hash}
        pin.pending_hash = digest
        pin.pending_definition = canonical
        pin.changed_at = timezone.now()
        pin.save(update_fields=["pending_hash", "pending_definition", "changed_at"])
        audit_change(
            action=AuditEvent.Action.TOOL_CHANGED,
            actor=actor,
            target=target,
            before=before,
            after={"definition_hash": pin.definition_hash, "pending_hash": digest},
        )
    return PinCheck(HELD, pin)


def tool_pin_approve(*, pin: ToolPin, expected_hash: str, actor) -> ToolPin:
    """Make the pending definition the pinned one. `expected_hash` is the pending hash the admin
    reviewed: if the server changed the tool again meanwhile, nothing is approved."""
    with transaction.atomic():
        current = ToolPin.objects.select_for_update().select_related("server").get(pk=pin.pk)
        if not current.pending_hash:
            raise PinError(_("승인할 변경된 정의가 없습니다."))
        if current.pending_hash != expected_hash:
            raise PinError(_("검토한 뒤 도구 정의가 다시 바뀌었습니다. 새 차이를 확인하세요."))
        before = {"definition_hash": current.definition_hash, "definition": current.definition}
        current.definition_hash = current.pending_hash
        current.definition = current.pending_definition
        current.pinned_at = timezone.now()
        current.approved_by = actor
        current.pending_hash = ""
        current.pending_definition = None
        current.changed_at = None
        current.save()
        audit_change(
            action=AuditEvent.Action.TOOL_PIN_APPROVED,
            actor=actor,
            target=f"{current.server.server_id}:{current.tool_name}",
            before=before,
            after={"definition_hash": current.definition_hash, "definition": current.definition},
        )
    return current


def pretty_definition(definition: dict | None) -> str:
    """A definition as stable, readable JSON (sorted keys, Korean kept as is)."""
    if definition is None:
        return ""
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)


def pin_definition_diff(pin: ToolPin) -> str:
    """A unified diff from the pinned definition to the pending one ("" if nothing is pending)."""
    if not pin.pending_hash:
        return ""
    return "\n".join(
        difflib.unified_diff(
            pretty_definition(pin.definition).splitlines(),
            pretty_definition(pin.pending_definition).splitlines(),
            fromfile=f"pinned {pin.definition_hash[:12]}",
            tofile=f"pending {pin.pending_hash[:12]}",
            lineterm="",
        )
    )
