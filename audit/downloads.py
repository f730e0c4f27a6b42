"""What an auditor downloads from the event list (the admin's export link, the API's export): a
file `python -m audit.verify` proves on its own, whatever the filter.

- The whole list: the export_audit format over every event, ending at a signed checkpoint that
  covers the last of them (one is signed now when none does yet).
- A filtered list: its events break the chain's links, so each is proven on its own instead: a
  proof bundle (each event with its inclusion proof in a signed checkpoint's tree), as
  `export_audit --prove` writes it.

Everything is decided before the first line is returned, so the caller records the export's own
audit event after what it exports: that event is in the next export, never in this one.
"""

from collections.abc import Iterator

import orjson

from audit.export import ExportError, jsonl_records, provable_range, requested_range
from audit.proofs import ProofError, proof_bundle
from audit.services import SOURCE

# Proving a filtered list costs a few tree reads per event: past this many, the download would
# take too long, and the auditor is asked to narrow the filter (or export everything).
PROVEN_EVENTS_MAX = 5000


def event_list_download(events, *, filtered: bool, source: str = SOURCE) -> Iterator[bytes]:
    """The lines of the download of `events` (a queryset of the list as shown). Raises
    ExportError, before any line, when the file could not be proven."""
    if not filtered:
        span = provable_range(requested_range(source=source), source=source)
        return (_line(record) for record in jsonl_records(span, source=source))
    sequences = list(
        events.filter(source=source)
        .order_by("sequence")
        .values_list("sequence", flat=True)[: PROVEN_EVENTS_MAX + 1]
    )
    if not sequences:
        raise ExportError("the filtered list holds no events")
    if len(sequences) > PROVEN_EVENTS_MAX:
        raise ExportError(
            f"the filtered list holds more than {PROVEN_EVENTS_MAX:,} events: narrow the filter, "
            "or export the whole list"
        )
    try:
        # Proven now, all of them: a failure is an error page, never half a file.
        return iter([_line(record) for record in proof_bundle(sequences, source=source)])
    except ProofError as exc:
        raise ExportError(str(exc)) from None


def _line(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"
