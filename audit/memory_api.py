"""The egs2 Memory API adapter: everything that knows its request and response shapes lives here.

Contract: POST {base}/v1/memories with a batch of memories; per-item results created / duplicate /
rejected; whole-request statuses decide between delivered, rejected, alarm and retry. Audit events
are memories of kind `audit_event`, signed checkpoints of kind `audit_checkpoint`. GET
{base}/v1/memories/{id} reads one back, for reconciliation.
"""

import json
import uuid
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

import httpx
from django.utils import timezone

from audit.chain import CONTENT_FIELDS, occurred_at_text
from core.outbound import (
    OutboundError,
    UnsafeUrl,
    checked_url,
    outbound_client,
    read_capped,
)
from core.redaction import redact_secrets

NAMESPACE = "hyperbook.audit"
KIND = "audit_event"
CHECKPOINT_KIND = "audit_checkpoint"
# An answer is per-item results for one batch, or one memory read back (a checkpoint): small.
MAX_RESPONSE_BYTES = 1_000_000


class MemoryApiConfigError(ValueError):
    """The Memory API URL or credential is unusable; delivery stays off until it is fixed."""


class MemoryApiReadError(RuntimeError):
    """A memory could not be read back (not a 404: the API failed or answered nonsense)."""


@dataclass
class BatchResult:
    delivered: list[str] = field(default_factory=list)  # event ids
    duplicates: list[str] = field(default_factory=list)  # of those, the ones it already held
    rejected: dict[str, str] = field(default_factory=dict)  # event id -> reason
    retry: list[str] = field(default_factory=list)  # transient: try again later
    alarm: str = ""  # configuration problem (401/403): keep pending, tell an operator
    retry_after: float | None = None
    split: bool = False  # 413: send smaller batches
    error: str = ""


def checked_base_url(url: str) -> str:
    try:
        return checked_url(url, name="EGS2_MEMORY_API_URL").rstrip("/")
    except UnsafeUrl as exc:
        raise MemoryApiConfigError(str(exc)) from None


def memory_for(event) -> dict:
    return {
        "id": str(event.id),
        "namespace": NAMESPACE,
        "kind": KIND,
        "occurred_at": occurred_at_text(event.occurred_at),
        "source": event.source,
        "sequence": event.sequence,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
        "content": {name: getattr(event, name) for name in CONTENT_FIELDS},
    }


def memory_for_checkpoint(checkpoint) -> dict:
    """A signed checkpoint as a memory: `sequence` and `hash` are the tree size and root it signs
    (the chain's head, for checkpoints signed before the tree), `prev_hash` the previous
    checkpoint's; the signed note is the proof."""
    memory = {
        "id": str(checkpoint.id),
        "namespace": NAMESPACE,
        "kind": CHECKPOINT_KIND,
        "occurred_at": occurred_at_text(checkpoint.created_at),
        "source": checkpoint.source,
        "sequence": checkpoint.sequence,
        "prev_hash": checkpoint.prev_hash,
        "hash": checkpoint.hash,
        "content": {
            "number": checkpoint.number,
            "origin": checkpoint.origin,
            "key_id": checkpoint.key_id,
            "note": checkpoint.note,
        },
    }
    if checkpoint.head_hash is not None:
        memory["content"]["head_hash"] = checkpoint.head_hash
    return memory


def post_batch(
    events: list, *, base_url: str, token: str, timeout: float, client: httpx.Client | None = None
) -> BatchResult:
    return post_memories(
        [memory_for(event) for event in events],
        base_url=base_url,
        token=token,
        timeout=timeout,
        client=client,
    )


def post_memories(
    memories: list[dict],
    *,
    base_url: str,
    token: str,
    timeout: float,
    client: httpx.Client | None = None,
) -> BatchResult:
    ids = [memory["id"] for memory in memories]
    body = {"memories": memories}
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Idempotency-Key": str(uuid.uuid4()),
    }
    own_client = client is None
    client = client or outbound_client(timeout=timeout)
    try:
        with client.stream(
            "POST", f"{checked_base_url(base_url)}/v1/memories", json=body, headers=headers
        ) as response:
            answer = read_capped(response, max_bytes=MAX_RESPONSE_BYTES)
    except httpx.HTTPError as exc:
        return BatchResult(retry=ids, error=f"transport: {type(exc).__name__}")
    except OutboundError:
        # Not known to be stored: the batch goes again.
        return BatchResult(retry=ids, error="response too large")
    finally:
        if own_client:
            client.close()
    return interpret_response(
        ids, response.status_code, response.headers, answer, sent_secrets=(token,)
    )


def read_memory(memory_id: str, *, base_url: str, token: str, client: httpx.Client) -> dict | None:
    """The memory as the Memory API stores it, or None when it holds none with that id (the
    client carries the timeout)."""
    url = f"{checked_base_url(base_url)}/v1/memories/{memory_id}"
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                raise MemoryApiReadError(f"HTTP {response.status_code} reading memory {memory_id}")
            body = read_capped(response, max_bytes=MAX_RESPONSE_BYTES)
    except OutboundError:
        raise MemoryApiReadError(f"memory {memory_id}: the answer is too large") from None
    except httpx.HTTPError as exc:
        raise MemoryApiReadError(f"transport: {type(exc).__name__}") from None
    try:
        memory = json.loads(body)
    except ValueError:
        raise MemoryApiReadError(f"memory {memory_id}: the answer is not JSON") from None
    if not isinstance(memory, dict):
        raise MemoryApiReadError(f"memory {memory_id}: the answer is not an object")
    return memory


def holds_the_same(sent: dict, stored: dict | None) -> bool:
    """Whether the memory read back is the one we sent: every field we sent, equal (the API adds
    `stored_at`). A duplicate answer only says the id is taken, not by what."""
    return stored is not None and all(stored.get(name) == value for name, value in sent.items())


def interpret_response(
    ids: list[str],
    status: int,
    headers: httpx.Headers,
    body: bytes,
    *,
    sent_secrets: tuple[str, ...] = (),
) -> BatchResult:
    """What an answer means for each id. The receiver's words are kept as reasons, with our
    secrets (`sent_secrets`, and anything shaped like a bearer) redacted."""
    if status in (200, 207):
        return _per_item(ids, body, sent_secrets)
    if status == 409:
        return BatchResult(delivered=ids, duplicates=list(ids))
    if status == 413 and len(ids) > 1:
        return BatchResult(retry=ids, split=True, error="413: batch too large")
    if status in (400, 413, 422):
        reason = f"{status}: {_their_words(body.decode('utf-8', 'replace'), sent_secrets, 200)}"
        return BatchResult(rejected={event_id: reason for event_id in ids})
    if status in (401, 403):
        return BatchResult(retry=ids, alarm=f"Memory API refused the credential ({status})")
    return BatchResult(retry=ids, retry_after=_retry_after(headers), error=f"HTTP {status}")


def _per_item(ids: list[str], body: bytes, sent_secrets: tuple[str, ...]) -> BatchResult:
    try:
        results = json.loads(body)["results"]
        by_id = {str(item["id"]): item for item in results if isinstance(item, dict)}
    except (ValueError, KeyError, TypeError):
        return BatchResult(retry=ids, error="unreadable response body")
    outcome = BatchResult()
    for event_id in ids:
        item = by_id.get(event_id) or {}
        status = item.get("status")
        if status in ("created", "duplicate"):
            outcome.delivered.append(event_id)
            if status == "duplicate":
                outcome.duplicates.append(event_id)
        elif status == "rejected":
            error = str(item.get("error", "rejected"))
            outcome.rejected[event_id] = _their_words(error, sent_secrets, 250)
        else:
            # Missing or unknown item status: not known to be stored, so it goes again.
            outcome.retry.append(event_id)
    if outcome.retry:
        outcome.error = "incomplete results"
    return outcome


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), 3600.0)
    try:
        delay = (parsedate_to_datetime(value) - timezone.now()).total_seconds()
    except (TypeError, ValueError):
        return None
    return min(max(delay, 0.0), 3600.0)


def _their_words(text: str, sent_secrets: tuple[str, ...], limit: int) -> str:
    # Redacted before it is shortened, so that no cut-off piece of a secret survives the cut; a
    # receiver may echo the bearer we sent it.
    return " ".join(redact_secrets(text, known=sent_secrets).split())[:limit]
