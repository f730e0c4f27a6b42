"""Comparing the local chain with the checkpoints the Memory API holds, our external anchor.

Someone with write access to our database can rewrite the chain and recompute every hash, or
delete its tail and rewind the head; the chain alone then still looks intact. They cannot change
the signed checkpoints already delivered. Checkpoint n has a fixed Memory API id (its origin and
number), so the anchor's latest checkpoint is found by asking for ids, not by trusting our
tables to say which exist.
"""

from dataclasses import dataclass

import httpx
from django.conf import settings

from audit import memory_api
from audit.checkpoints import checkpoint_memory_id, configured_verifiers, origin_for
from audit.models import AuditCheckpoint, AuditEvent, Delivery
from audit.services import SOURCE
from audit.signed_note import Checkpoint, NoteError, open_checkpoint
from audit.tree import tree_ends_with
from core.outbound import outbound_client

# How many of the latest locally delivered checkpoints are compared with their copies.
RECENT_CHECKPOINTS = 3


class AnchorMismatch(Exception):
    def __init__(self, message: str, first_bad_sequence: int | None = None):
        super().__init__(message)
        self.first_bad_sequence = first_bad_sequence


@dataclass
class AnchorReport:
    ok: bool
    message: str
    first_bad_sequence: int | None = None
    requests: int = 0


class _Anchor:
    """The Memory API's checkpoints of one origin, read once each and verified."""

    def __init__(self, client: httpx.Client, origin: str):
        self.client = client
        self.origin = origin
        self.verifiers = configured_verifiers()
        self.read: dict[int, tuple[Checkpoint, str] | None] = {}

    def get(self, number: int) -> tuple[Checkpoint, str] | None:
        """(the verified checkpoint, its note) the Memory API holds as number `number`."""
        if number not in self.read:
            self.read[number] = self._fetch(number)
        return self.read[number]

    def held(self, number: int) -> Checkpoint:
        """The verified checkpoint numbered `number`, one at or below latest_number's answer:
        1..n are delivered in order, so the Memory API holds each of them."""
        held = self.get(number)
        assert held is not None, f"the Memory API holds no checkpoint {number} below its latest"
        return held[0]

    def _fetch(self, number: int) -> tuple[Checkpoint, str] | None:
        memory = memory_api.read_memory(
            str(checkpoint_memory_id(self.origin, number)),
            base_url=settings.EGS2_MEMORY_API_URL,
            token=settings.EGS2_MEMORY_API_TOKEN or "",
            client=self.client,
        )
        if memory is None:
            return None
        content = memory.get("content")
        note = content.get("note") if isinstance(content, dict) else None
        if memory.get("kind") != memory_api.CHECKPOINT_KIND or not isinstance(note, str):
            raise AnchorMismatch(f"the Memory API's copy of checkpoint {number} is not one")
        try:
            signed = open_checkpoint(note, self.verifiers)
        except NoteError as exc:
            raise AnchorMismatch(
                f"the Memory API's copy of checkpoint {number} does not verify: {exc}"
            ) from None
        if signed.origin != self.origin:
            raise AnchorMismatch(f"the Memory API's checkpoint {number} is of {signed.origin}")
        return signed, note

    def latest_number(self, start: int) -> int:
        """The highest n the Memory API holds (1..n are delivered in order, so "held" only
        turns from yes to no once): gallop up from `start`, then halve the gap."""
        if start > 0 and self.get(start) is None:
            low, high = 0, start  # held: low (or none); not held: high
        else:
            low, step = start, 1
            while self.get(low + step) is not None:
                low, step = low + step, step * 2
            high = low + step
        while high - low > 1:
            middle = (low + high) // 2
            if self.get(middle) is None:
                high = middle
            else:
                low = middle
        return low


def reconcile_with_memory_api(
    *, source: str = SOURCE, client: httpx.Client | None = None
) -> AnchorReport:
    if not settings.EGS2_MEMORY_API_URL:
        return AnchorReport(False, "EGS2_MEMORY_API_URL is not set: there is no anchor to read")
    own_client = client is None
    client = client or outbound_client(timeout=settings.EGS2_MEMORY_API_TIMEOUT_SECONDS)
    anchor = _Anchor(client, origin_for(source))
    try:
        message = _compare(anchor, source)
    except AnchorMismatch as exc:
        return AnchorReport(False, str(exc), exc.first_bad_sequence, len(anchor.read))
    except (memory_api.MemoryApiReadError, memory_api.MemoryApiConfigError) as exc:
        return AnchorReport(
            False, f"the Memory API could not be read: {exc}", None, len(anchor.read)
        )
    finally:
        if own_client:
            client.close()
    return AnchorReport(True, message, None, len(anchor.read))


def _compare(anchor: _Anchor, source: str) -> str:
    local = AuditCheckpoint.objects.filter(source=source)
    delivered = list(
        local.filter(delivery__state=Delivery.State.DELIVERED).order_by("-number")[
            :RECENT_CHECKPOINTS
        ]
    )
    for checkpoint in delivered:  # our copies of what we sent must be what the anchor holds
        held = anchor.get(checkpoint.number)
        if held is None:
            raise AnchorMismatch(
                f"checkpoint {checkpoint.number} is marked delivered, but the Memory API has none",
                checkpoint.sequence,
            )
        if held[1] != checkpoint.note:
            raise AnchorMismatch(
                f"checkpoint {checkpoint.number} differs from the Memory API's copy",
                checkpoint.sequence,
            )
    start = delivered[0].number if delivered else 0
    latest = anchor.latest_number(start)
    events = AuditEvent.objects.filter(source=source)
    if latest == 0:
        if events.exists():
            raise AnchorMismatch(
                f"the Memory API holds no checkpoint of {anchor.origin} yet: "
                "the chain cannot be compared with its anchor"
            )
        return "no events and no anchored checkpoints yet"
    if not _matches(anchor.held(latest), events, source):
        _raise_first_mismatch(anchor, events, latest, source)
    signed = anchor.held(latest)
    return f"the chain matches the Memory API's latest checkpoint ({latest}, event #{signed.size})"


def _matches(signed: Checkpoint, events, source: str) -> bool:
    """Whether the local log is what the anchored checkpoint signs: its root is the local tree's,
    ending with the local chain's hash at that size (or, signed before the tree existed, the root
    is that hash itself; no chain hash is also the root of a tree over it)."""
    stored = events.filter(sequence=signed.size).values_list("hash", flat=True).first()
    if stored is None:
        return False
    return stored == signed.root_hash or tree_ends_with(
        source, signed.size, stored, signed.root_hash
    )


def _raise_first_mismatch(anchor: _Anchor, events, latest: int, source: str) -> None:
    """Find the first anchored checkpoint the chain no longer matches (they match up to some
    number, then not: halve the range) and say what it means."""
    good, bad = 0, latest
    while bad - good > 1:
        middle = (good + bad) // 2
        if _matches(anchor.held(middle), events, source):
            good = middle
        else:
            bad = middle
    signed = anchor.held(bad)
    matched_to = anchor.held(good).size if good else 0
    last = events.order_by("-sequence").values_list("sequence", flat=True).first() or 0
    if last < signed.size:
        raise AnchorMismatch(
            f"the Memory API's checkpoint {bad} covers event #{signed.size}, but the local chain "
            f"ends at #{last}: events were deleted and the chain head rewound",
            last + 1,
        )
    raise AnchorMismatch(
        f"event #{signed.size} does not match the Memory API's checkpoint {bad}; the chain matches "
        f"its anchor up to event #{matched_to}: events after it were changed or re-chained",
        matched_to + 1,
    )
