"""The embedded default broker: kombu's filesystem transport, made crash-safe.

Two changes to kombu's own channel (see docs/decisions/0002-embedded-broker.md):
- a message is written under a hidden temporary name, flushed, and renamed into place, so a
  consumer never sees a file that is still being written (a rename is atomic on one filesystem);
- a message that cannot be read as one (empty, truncated, not JSON, not a kombu envelope) is
  logged, moved aside into the dead-letter folder and skipped: it never reaches, let alone kills,
  the worker.
Every file and folder is the service user's only (0600/0700).
"""

import json
import logging
import os
import shutil
import uuid
from time import monotonic

from kombu.transport import filesystem, virtual
from kombu.transport.virtual import Empty

logger = logging.getLogger("hyperbook.broker")

TEMPORARY_PREFIX = "."  # the consumer's listing skips names that do not end in ".<queue>.msg"


class Channel(filesystem.Channel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        options = self.transport_options
        self.dead_letter_folder = options.get("dead_letter_folder") or os.path.join(
            self.data_folder_in, "..", "broker-dead"
        )
        for folder in (
            self.data_folder_in,
            self.data_folder_out,
            self.processed_folder,
            self.dead_letter_folder,
        ):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)  # also when an older version made it world-readable

    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, f"{TEMPORARY_PREFIX}{name}.part")
        data = json.dumps(payload).encode()
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            # No fsync: the rename is what makes a message whole to a consumer; a message lost
            # with the machine's power is found again by the delivery sweep (the outbox is the
            # database, not the broker).
            os.replace(temporary, final)
        except OSError as exc:
            _remove_quietly(temporary)
            raise filesystem.ChannelError(f"Cannot add a message to {queue!r}") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(TEMPORARY_PREFIX) or name.partition(".")[2] != wanted:
                continue
            # Taking the file is the claim: of several consumers, one rename succeeds.
            claimed = os.path.join(self.processed_folder, name)
            try:
                os.replace(os.path.join(self.data_folder_in, name), claimed)
            except OSError:
                continue  # another consumer took it
            try:
                with open(claimed, "rb") as handle:
                    data = handle.read()
            except OSError:
                logger.warning("broker: message %s vanished while being read", name)
                continue
            message = _envelope(data)
            if message is None:
                self._dead_letter(claimed, name, len(data))
                continue
            if not self.store_processed:
                _remove_quietly(claimed)
            return message
        raise Empty()

    def _dead_letter(self, claimed: str, name: str, size: int) -> None:
        try:
            os.chmod(claimed, 0o600)  # whoever wrote it, it is kept as the service's own
            shutil.move(claimed, os.path.join(self.dead_letter_folder, name))
        except OSError:
            _remove_quietly(claimed)
        logger.error(
            "broker: malformed message %s (%s bytes) moved to %s and skipped",
            name,
            size,
            self.dead_letter_folder,
        )


class Transport(filesystem.Transport):
    Channel = Channel
    global_state = virtual.BrokerState()  # its own, not the stock transport's


def _envelope(data: bytes) -> dict | None:
    """The kombu message in `data`, or None when it is not one."""
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(message, dict) or not isinstance(message.get("properties"), dict):
        return None
    if "body" not in message:
        return None
    return message


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
