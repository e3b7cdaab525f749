"""What the Python SDK spends turning a DecisionRequest into an Observation, old way against new
in the same run: every request's history converted afresh, against the stream's
`RoundHistories` (each history action converted once per round); both with interned cards.

Run as ``.venv/bin/python bench/sdk.py [--matches N] [--json PATH]``. The requests are those of
N seeded 4-player matches of random play (`engine.random_playout`), encoded by the referee's
own wire code and parsed back, in the order one stream per seat would get them. Each way
converts them all, alternating runs (``--repeats``), and the table gives the median µs per
request of each way and their ratio.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Iterator
from typing import Any

from common import write_json
from engine import random_playout
from rich.console import Console
from rich.table import Table
from scout.v1 import arena_pb2
from scout_arena.server import convert as wire
from scout_client import convert as sdk_wire
from scout_rules import Action, State


def requests(matches: int) -> list[list[arena_pb2.DecisionRequest]]:
    """Per seat-stream, the DecisionRequests it receives, over ``matches`` matches of random
    play (`engine.random_playout`)."""
    streams: list[list[arena_pb2.DecisionRequest]] = [[] for _ in range(4)]
    for seed in range(matches):
        asked = itertools.count(1)

        def ask(state: State, actor: int, _action: Action, seed: int = seed,
                asked: Iterator[int] = asked) -> None:
            message = wire.decision_request(state.observation(actor), f"m-{seed}", next(asked),
                                            1000, 10_000)
            streams[actor].append(arena_pb2.RefereeMessage.FromString(
                message.SerializeToString()).decision_request)

        random_playout(4, seed, on_action=ask)
    return streams


def fresh(streams: list[list[arena_pb2.DecisionRequest]]) -> None:
    for stream in streams:
        for request in stream:
            sdk_wire.decision_request_from_proto(request)


def cached(streams: list[list[arena_pb2.DecisionRequest]]) -> None:
    for stream in streams:
        histories = sdk_wire.RoundHistories()
        for request in stream:
            sdk_wire.decision_request_from_proto(request, histories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    console = Console()
    streams = requests(args.matches)
    count = sum(len(s) for s in streams)
    times: dict[str, list[float]] = {"fresh": [], "cached": []}
    for _ in range(args.repeats):
        for name, way in (("fresh", fresh), ("cached", cached)):
            started = time.perf_counter()
            way(streams)
            times[name].append((time.perf_counter() - started) / count * 1e6)
    medians = {name: statistics.median(values) for name, values in times.items()}
    table = Table(title=f"SDK: DecisionRequest -> Observation, {count:,} requests of "
                        f"{args.matches} 4-player matches")
    for column in ("way", "median µs/request", "min", "max"):
        table.add_column(column, justify="right")
    for name, values in times.items():
        table.add_row(name, f"{medians[name]:.1f}", f"{min(values):.1f}", f"{max(values):.1f}")
    console.print(table)
    ratio = medians["fresh"] / medians["cached"]
    console.print(f"cached is {ratio:.2f}x as fast as fresh (medians of {args.repeats} runs)")
    data: dict[str, Any] = {"benchmark": "scout-arena sdk conversion", "requests": count,
                            "matches": args.matches, "us_per_request": times,
                            "median_us": medians, "fresh_over_cached": ratio}
    if args.json:
        write_json(args.json, data, console)


if __name__ == "__main__":
    main()
