import datetime as dt

import orjson
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from audit.export import ExportError, export_jsonl, export_ocsf, provable_range, requested_range
from audit.proofs import ProofError, proof_bundle


def moment(value: str) -> dt.datetime:
    """An ISO date or date-time; without a zone, in the project's time zone."""
    parsed = parse_datetime(value)
    if parsed is None and (day := parse_date(value)) is not None:
        parsed = dt.datetime.combine(day, dt.time())
    if parsed is None:
        raise ValueError(value)
    return timezone.make_aware(parsed) if timezone.is_naive(parsed) else parsed


class Command(BaseCommand):
    help = (
        "Write audit events to standard output, streamed. jsonl: every event with its sequence, "
        "previous hash and hash, then the signed checkpoints covering them (widened to the "
        "nearest checkpoints, so `python -m audit.verify` can prove the file). ocsf: OCSF API "
        "Activity (6003), the chain fields in `unmapped`. --prove SEQUENCE (repeatable): only "
        "those events, each with its inclusion proof in the latest checkpoint's tree and that "
        "checkpoint, which `python -m audit.verify` checks on their own."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", choices=("jsonl", "ocsf"), default="jsonl")
        parser.add_argument("--since", type=moment, help="events at or after (ISO date/time)")
        parser.add_argument("--until", type=moment, help="events before (ISO date/time)")
        parser.add_argument("--after-sequence", type=int, help="events after this sequence")
        parser.add_argument("--source", default="hyperbook")
        parser.add_argument(
            "--prove", type=int, action="append", metavar="SEQUENCE", help="prove this event"
        )

    def handle(self, *args, format, since, until, after_sequence, source, prove, **options):
        if prove:
            self._prove(prove, source)
            return
        span = requested_range(
            source=source, since=since, until=until, after_sequence=after_sequence
        )
        try:
            if format == "jsonl":
                span = provable_range(span, source=source)
                written = export_jsonl(self.stdout, span, source=source)
            else:
                written = export_ocsf(self.stdout, span, source=source)
        except ExportError as exc:
            raise CommandError(str(exc)) from None
        where = f"#{span.first}..#{span.last}" if written else "none"
        self.stderr.write(f"{written} events exported ({where})")

    def _prove(self, sequences: list[int], source: str) -> None:
        try:
            lines = [orjson.dumps(line).decode() for line in proof_bundle(sequences, source=source)]
        except ProofError as exc:
            raise CommandError(str(exc)) from None
        for line in lines:
            self.stdout.write(line)
        self.stderr.write(f"{len(lines) - 1} events proven")
