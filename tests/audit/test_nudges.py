"""The nudge publisher: never the caller's wait, one publish for many nudges, rest after failure."""

import threading
import time

from audit import nudges
from audit.nudges import Nudger


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_nudge_returns_at_once_while_the_broker_hangs_and_later_ones_are_merged():
    nudger, release, published = Nudger(), threading.Event(), []

    def publish():
        published.append(time.monotonic())
        release.wait(5)

    started = time.monotonic()
    for _ in range(20):
        nudger.nudge("delivery", publish)
    assert time.monotonic() - started < 0.1
    wait_for(lambda: len(published) == 1)
    for _ in range(20):
        nudger.nudge("delivery", publish)  # while the first publish hangs
    release.set()
    wait_for(lambda: len(published) == 2)
    time.sleep(0.2)
    assert len(published) == 2


def test_after_a_failed_publish_it_rests_before_trying_again(monkeypatch):
    monkeypatch.setattr(nudges, "FIRST_REST_SECONDS", 0.3)
    nudger, attempts = Nudger(), []

    def broker_down():
        attempts.append(time.monotonic())
        raise ConnectionRefusedError

    nudger.nudge("delivery", broker_down)
    wait_for(lambda: len(attempts) == 1)
    nudger.nudge("delivery", broker_down)
    nudger.nudge("checkpoint", broker_down)
    wait_for(lambda: len(attempts) == 3)
    assert attempts[1] - attempts[0] >= 0.3  # one rest, then both kinds of nudge once each
