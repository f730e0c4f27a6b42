"""The embedded broker: our crash-safe filesystem transport against kombu's own, side by side.

Publishes and then consumes N small messages (the size of an audit delivery request) through each
transport in a throwaway folder, over several rounds, and reports messages per second for each
and the ratio. Loopback only (no network at all), bounded by N and the rounds.

    .venv/bin/python bench/broker_bench.py --messages 2000 --rounds 5
"""

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kombu import Connection, Exchange, Queue  # noqa: E402

TRANSPORTS = {
    "kombu filesystem": "kombu.transport.filesystem:Transport",
    "hyperbook (write-then-rename, dead letters)": "core.broker:Transport",
}


def one_round(transport: str, messages: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        options = {
            "data_folder_in": f"{folder}/in",
            "data_folder_out": f"{folder}/in",
            "processed_folder": f"{folder}/processed",
            "dead_letter_folder": f"{folder}/dead",
            "control_folder": f"{folder}/control",
        }
        for name in ("in", "processed"):
            Path(folder, name).mkdir()
        # A name of its own each round: kombu remembers bindings per process, not per folder.
        name = f"bench{uuid.uuid4().hex[:8]}"
        queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
        body = {"task": "audit.deliver_pending", "id": "0" * 36, "args": [], "kwargs": {}}
        with Connection("filesystem://", transport=transport, transport_options=options) as conn:
            producer = conn.Producer(serializer="json")
            started = time.perf_counter()
            for _ in range(messages):
                producer.publish(body, exchange=queue.exchange, routing_key=name, declare=[queue])
            published = time.perf_counter() - started
            simple = conn.SimpleQueue(queue)
            started = time.perf_counter()
            for _ in range(messages):
                simple.get(timeout=5).ack()
            consumed = time.perf_counter() - started
            simple.close()
    return messages / published, messages / consumed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="500 messages, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.rounds = 500, 3
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in TRANSPORTS}
    for _ in range(args.rounds):  # interleaved, so a busy moment hurts both alike
        for name, transport in TRANSPORTS.items():
            results[name].append(one_round(transport, args.messages))
    print(f"{args.messages} messages, {args.rounds} rounds (median, and the rounds' range)")
    print(f"{'transport':46} {'publish msg/s':>22} {'consume msg/s':>22}")
    medians = {}
    for name, rounds in results.items():
        publish, consume = [r[0] for r in rounds], [r[1] for r in rounds]
        medians[name] = (statistics.median(publish), statistics.median(consume))
        print(
            f"{name:46} {medians[name][0]:9,.0f} ({min(publish):,.0f}-{max(publish):,.0f})"
            f" {medians[name][1]:9,.0f} ({min(consume):,.0f}-{max(consume):,.0f})"
        )
    ours, theirs = medians[list(TRANSPORTS)[1]], medians[list(TRANSPORTS)[0]]
    print(
        f"ratio ours/kombu: publish {ours[0] / theirs[0]:.2f}x, consume {ours[1] / theirs[1]:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
