"""The interface the delivery engine calls on every audit sink (a receiver outside hyperbook)."""

from typing import Protocol


class SinkUnavailable(Exception):
    """The sink could not take the batch now: nothing of it counts as delivered, and the engine
    sends it again, after `retry_after` seconds if the sink said so (None: the engine's backoff)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Sink(Protocol):
    name: str  # e.g. "syslog": names the sink in delivery state, logs and alarms

    def enabled(self) -> bool:
        """Whether the sink is configured at all (an unconfigured sink is never called)."""
        ...

    def deliver(self, events: list[dict]) -> set[str]:
        """Send a batch of exported event records (audit.export.event_record(...) dicts, in
        sequence order); return the ids (record["id"]) the sink acknowledged. Raise
        SinkUnavailable when nothing could be sent."""
        ...
