"""Search speed: iterations per CPU-second of the bundled search bot's tree search, by setting,
side by side in one process.

Run as ``.venv/bin/python bench/search.py --json bench/results/search.json`` (``--quick`` for a
short run). The positions are seeded: for each player count, rounds dealt with random rotations
and played some greedy moves in, seen from the seat to act (its `InformationSet`, as a bot gets
it). Every setting searches every position with the same seeds, the settings taking turns
(``--reps`` rounds of all of them), so that a busy machine slows them alike; the figure is
iterations over the process CPU time. The settings are `mcts.search`'s:

* ``uniform``: uniform fills, a tree on hand positions alone (the search as issue 31 found it);
* ``observe``: the tree branches on the faces an opponent showed (`TreeNode.after_show`);
* ``default``: that, and fills that agree with the opponents' rotations (4 draws), the bot's
  default.
* ``default, Python reads``: the default with the rotation reads' `more_playable_rotated` in
  pure Python (`scout_rules.groups.REFERENCE`), what its C twin saves.

Strength at equal think time is `bench/strength.py`'s job; this says what each setting costs.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from typing import Any
from unittest.mock import patch

from common import write_json
from rich.console import Console
from rich.table import Table
from scout_arena.search import knowledge, search
from scout_rules import InformationSet, Phase, State, more_playable_rotated
from scout_rules.groups import REFERENCE
from scout_rules.playout import greedy_action

PLAYER_COUNTS = (2, 3, 4, 5)
SETTINGS: dict[str, dict[str, Any]] = {  # Any: keyword arguments of differing types
    "uniform": {"observe": False, "sample_tries": 1},
    "observe": {"observe": True, "sample_tries": 1},
    "default": {},
    "default, Python reads": {},
}


def positions(num_players: int, count: int) -> list[InformationSet]:
    """``count`` seeded positions early in a round, each from the acting seat's view."""
    out: list[InformationSet] = []
    seed = 0
    while len(out) < count:
        rng = random.Random(seed)
        state = State.new(num_players, seed)
        seed += 1
        for s in range(num_players):
            state.choose_rotation(s, rng.random() < 0.5)
        for _ in range(rng.randint(0, 3 * num_players)):
            state.apply(greedy_action(state))
            if state.phase is not Phase.PLAY or state.is_over:
                break
        if state.phase is Phase.PLAY and not state.is_over:
            seat = state.current_seat
            assert seat is not None
            out.append(InformationSet.from_observation(state.observation(seat)))
    return out


def measure(num_players: int, count: int, iterations: int, reps: int) -> dict[str, float]:
    """Iterations per CPU-second of each setting over the same positions and seeds."""
    infos = positions(num_players, count)
    cpu = {name: 0.0 for name in SETTINGS}
    for _ in range(reps):
        for name, knobs in SETTINGS.items():
            rule = (REFERENCE["more_playable_rotated"] if name == "default, Python reads"
                    else more_playable_rotated)
            with patch.object(knowledge, "more_playable_rotated", rule):
                started = time.process_time()
                for i, info in enumerate(infos):
                    search(info, random.Random(i), iterations=iterations, deadline=None, **knobs)
                cpu[name] += time.process_time() - started
    done = iterations * len(infos) * reps
    return {name: done / seconds for name, seconds in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default="bench/results/search.json")
    parser.add_argument("--quick", action="store_true", help="fewer positions and rounds")
    parser.add_argument("--reps", type=int, default=None, help="rounds of every setting")
    args = parser.parse_args()
    count, iterations = (4, 300) if args.quick else (12, 1000)
    reps = args.reps or (2 if args.quick else 3)
    console = Console(width=120)
    results = [(n, measure(n, count, iterations, reps)) for n in PLAYER_COUNTS]
    table = Table(title=f"search iterations per CPU-second ({iterations}-iteration searches, "
                        f"{count} positions, {reps} rounds)")
    table.add_column("players", justify="right")
    for name in SETTINGS:
        table.add_column(name, justify="right")
        if name != "uniform":
            table.add_column(f"{name} / uniform", justify="right")
    for n, rates in results:
        cells = [str(n)]
        for name in SETTINGS:
            cells.append(f"{rates[name]:,.0f}")
            if name != "uniform":
                cells.append(f"{rates[name] / rates['uniform']:.2f}")
        table.add_row(*cells)
    console.print(table)
    median = statistics.median(rates["default"] / rates["uniform"] for _, rates in results)
    console.print(f"[dim]default / uniform, median over player counts: {median:.2f}[/]")
    rows = [{"players": n, "positions": count, "iterations": iterations, "reps": reps,
             "iterations_per_cpu_s": {k: round(v) for k, v in rates.items()},
             "ratio_to_uniform": {k: round(v / rates["uniform"], 3) for k, v in rates.items()}}
            for n, rates in results]
    write_json(args.json, {"machine": platform.platform(), "python": sys.version.split()[0],
                           "rows": rows}, console)


if __name__ == "__main__":
    main()
