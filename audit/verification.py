"""Checking the chain: every sequence present, every hash recomputed, every link matching, and
every stored checkpoint signed by a trusted key over the log at its sequence: the root of the
Merkle tree whose last leaf is the chain's hash there (or, for checkpoints signed before the tree
existed, that hash itself)."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, event_hash
from audit.checkpoints import configured_verifiers, opened_checkpoint
from audit.models import AuditCheckpoint, AuditEvent, ChainHead, ChainVerification
from audit.selectors import events_in_sequence
from audit.services import SOURCE
from audit.signed_note import NoteError
from audit.tree import tree_ends_with

FIELDS = [f.name for f in AuditEvent._meta.concrete_fields]
REPEAT_WINDOW_SECONDS = 60  # presses within a minute of a check are answered with that check
JOB_LOST_AFTER_SECONDS = 660  # the task's time limit: a check queued or running longer is lost


@dataclass
class ChainReport:
    ok: bool
    events_checked: int
    message: str
    first_bad_sequence: int | None = None
    checkpoints_checked: int = 0
    verified_through: int = 0  # the last sequence found intact (when ok)


def verify_chain(
    *, source: str = "hyperbook", chunk: int = 5000, verified_through: int = 0
) -> ChainReport:
    """Check the whole chain; or, given the sequence an earlier check found intact up to
    (`verified_through`), only what follows the last signed checkpoint at or before it: that
    checkpoint's signature vouches for everything before it, which was checked then. Every
    stored checkpoint's signature is checked either way (they are few)."""
    checkpoints, problem = _stored_checkpoints(source)
    if problem is not None:
        return problem
    # The head is read before the events, and the check stops at it: events appended while the
    # check runs are for the next check. The head moves in the same transaction as its event,
    # so every event up to it is there to read; a checkpoint read before it covers no more.
    head = ChainHead.objects.filter(source=source).first()
    through = head.last_sequence if head is not None else None
    start = max((s for s in checkpoints if s <= verified_through), default=0)
    # From a checkpoint: its own event is read again, and must hash to what it signs (below);
    # that event's link backwards is covered by the hash the checkpoint signs.
    expected_sequence, expected_prev = (start, None) if start else (1, GENESIS_HASH)
    checked = 0
    last_sequence = 0
    events = events_in_sequence(
        source=source, fields=FIELDS, after=max(start - 1, 0), through=through, chunk=chunk
    )
    for row in events:
        sequence = row["sequence"]
        if sequence != expected_sequence:
            return _bad(checked, expected_sequence, f"missing event #{expected_sequence}")
        if expected_prev is not None and row["prev_hash"] != expected_prev:
            return _bad(checked, sequence, f"event #{sequence} does not link to #{sequence - 1}")
        if event_hash(row) != row["hash"]:
            return _bad(checked, sequence, f"event #{sequence} was altered (hash mismatch)")
        signed = checkpoints.get(sequence)
        if signed is not None and not signs_chain_head(signed, row["hash"]):
            return _bad(
                checked,
                sequence,
                f"event #{sequence} does not match signed checkpoint {signed.number}",
            )
        expected_prev, expected_sequence = row["hash"], sequence + 1
        last_sequence = sequence
        checked += 1
    beyond = [c for c in checkpoints.values() if c.sequence > last_sequence]
    if beyond:
        signed = min(beyond, key=lambda c: c.sequence)
        return _bad(
            checked,
            last_sequence + 1,
            f"missing event #{last_sequence + 1} (signed checkpoint {signed.number} "
            f"covers #{signed.sequence})",
        )
    if head is not None and head.last_sequence != last_sequence:
        return _bad(
            checked,
            last_sequence + 1,
            f"missing event #{last_sequence + 1} (chain head is #{head.last_sequence})",
        )
    if head is not None and head.last_hash != expected_prev:
        return _bad(checked, last_sequence, "the chain head does not match the last event")
    if start:
        checkpoint = checkpoints[start].number
        message = (
            f"{checked} events from signed checkpoint {checkpoint} (#{start}) on, chain intact; "
            f"{len(checkpoints)} signed checkpoints verified"
        )
    else:
        message = f"{checked} events, chain intact; {len(checkpoints)} signed checkpoints verified"
    return ChainReport(
        True,
        checked,
        message,
        checkpoints_checked=len(checkpoints),
        verified_through=last_sequence,
    )


def signs_chain_head(checkpoint: AuditCheckpoint, head_hash: str) -> bool:
    """Whether the checkpoint signs a log whose event #sequence has this hash: under the tree rule
    that hash is the last leaf of the tree the signed root is over, as its inclusion proof from
    the stored nodes shows (a node that does not match the events leads to another root)."""
    if checkpoint.head_hash is None:
        return checkpoint.hash == head_hash
    return checkpoint.head_hash == head_hash and tree_ends_with(
        checkpoint.source, checkpoint.sequence, head_hash, checkpoint.hash
    )


def _stored_checkpoints(source: str) -> tuple[dict[int, AuditCheckpoint], ChainReport | None]:
    """The stored checkpoints by the sequence they cover, each verified against the trusted
    keys; or the first problem with them. They number 1, 2, 3… without gaps."""
    verifiers = configured_verifiers()
    by_sequence: dict[int, AuditCheckpoint] = {}
    expected_number = 1
    tree_from = None  # the first checkpoint signed over the tree: none after it may sign a head
    for checkpoint in AuditCheckpoint.objects.filter(source=source).order_by("number"):
        if checkpoint.number != expected_number:
            return {}, _bad(0, checkpoint.sequence, f"missing checkpoint {expected_number}")
        if checkpoint.head_hash is not None:
            tree_from = tree_from or checkpoint.number
        elif tree_from is not None:
            return {}, _bad(
                0,
                checkpoint.sequence,
                f"checkpoint {checkpoint.number} signs the chain's head, but checkpoints sign "
                f"the tree from checkpoint {tree_from} on",
            )
        try:
            opened_checkpoint(checkpoint, verifiers)
        except NoteError as exc:
            return {}, _bad(
                0, checkpoint.sequence, f"checkpoint {checkpoint.number} is not valid: {exc}"
            )
        by_sequence[checkpoint.sequence] = checkpoint
        expected_number += 1
    return by_sequence, None


def verify_and_record(*, source: str = "hyperbook") -> ChainReport:
    """A full check, now, in this process (the command's)."""
    started_at = timezone.now()
    report = verify_chain(source=source)
    ChainVerification.objects.create(
        started_at=started_at,
        finished_at=timezone.now(),
        ok=report.ok,
        events_checked=report.events_checked,
        verified_through=report.verified_through,
        message=report.message[:300],
    )
    return report


class FullCheckTooSoon(Exception):
    def __init__(self, last: ChainVerification, next_at):
        super().__init__(f"a full check was asked for at {last.checked_at}")
        self.last, self.next_at = last, next_at


def verification_in_progress() -> ChainVerification | None:
    """The auditors' check queued or running now, if any."""
    lost_before = timezone.now() - timedelta(seconds=JOB_LOST_AFTER_SECONDS)
    return (
        ChainVerification.objects.exclude(requested_by="")
        .filter(
            state__in=[ChainVerification.State.QUEUED, ChainVerification.State.RUNNING],
            checked_at__gte=lost_before,
        )
        .first()
    )


def verification_request(*, full: bool, requested_by: str) -> tuple[ChainVerification, bool]:
    """The check that answers an auditor's press: the one asked for within the last minute, or
    one still queued or running, if any (so checks run one at a time); else a new one, queued for
    a worker. Returns it and whether it is new. A full check reads every event, so one may be
    asked for only every AUDIT_FULL_VERIFY_INTERVAL_SECONDS: else FullCheckTooSoon."""
    now = timezone.now()
    with transaction.atomic():
        # Presses wait for each other here: two at once never queue two checks.
        list(ChainHead.objects.select_for_update().filter(source=SOURCE))
        jobs = ChainVerification.objects.exclude(requested_by="")
        answering = verification_in_progress() or (
            jobs.filter(checked_at__gte=now - timedelta(seconds=REPEAT_WINDOW_SECONDS)).first()
        )
        if answering is not None:
            return answering, False
        if full:
            interval = timedelta(seconds=settings.AUDIT_FULL_VERIFY_INTERVAL_SECONDS)
            ran = jobs.filter(full=True, checked_at__gte=now - interval).exclude(
                state=ChainVerification.State.DONE,
                ok__isnull=True,  # never ran: not queued
            )
            last_full = ran.first()
            if last_full is not None:
                raise FullCheckTooSoon(last_full, last_full.checked_at + interval)
        job = ChainVerification.objects.create(
            state=ChainVerification.State.QUEUED, full=full, requested_by=requested_by
        )
    try:
        # Imported here: the task module imports Celery, which services otherwise need not load.
        from audit.tasks import verify_chain_job

        verify_chain_job.apply_async((job.pk,), retry=False)
    except Exception as exc:  # the broker is down: say so rather than leave it queued
        ChainVerification.objects.filter(pk=job.pk).update(
            state=ChainVerification.State.DONE,
            finished_at=timezone.now(),
            message=f"could not be queued ({type(exc).__name__}); try again later",
        )
        job.refresh_from_db()
    return job, True


def verification_run(*, verification_id: int | None = None) -> ChainVerification | None:
    """Run a queued check (a worker's task): this one, or (the periodic sweep's) the oldest one
    queued, whose message may have been lost with a worker or a broker. A check already taken
    by a worker is left to it, so a message delivered twice runs it once."""
    if verification_id is None:
        verification_id = (
            ChainVerification.objects.filter(state=ChainVerification.State.QUEUED)
            .order_by("checked_at")
            .values_list("pk", flat=True)
            .first()
        )
        if verification_id is None:
            return None
    claimed = ChainVerification.objects.filter(
        pk=verification_id, state=ChainVerification.State.QUEUED
    ).update(state=ChainVerification.State.RUNNING, started_at=timezone.now())
    if not claimed:
        return None
    job = ChainVerification.objects.get(pk=verification_id)
    verified_through = 0
    if not job.full:
        last_good = ChainVerification.objects.filter(
            ok=True, state=ChainVerification.State.DONE
        ).first()  # the latest asked for: checks run one at a time
        verified_through = last_good.verified_through if last_good else 0
    report = verify_chain(source=SOURCE, verified_through=verified_through)
    job.state = ChainVerification.State.DONE
    job.finished_at = timezone.now()
    job.ok = report.ok
    job.events_checked = report.events_checked
    job.verified_through = report.verified_through
    job.message = report.message[:300]
    job.save(
        update_fields=[
            "state",
            "finished_at",
            "ok",
            "events_checked",
            "verified_through",
            "message",
        ]
    )
    return job


def _bad(checked: int, sequence: int, message: str) -> ChainReport:
    return ChainReport(False, checked, message, first_bad_sequence=sequence)
