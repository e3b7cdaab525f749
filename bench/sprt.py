"""SPRT benchmark: the same duplicate-deal pairs played in process and as bot subprocesses.

Run as ``.venv/bin/python bench/sprt.py --json bench/results/sprt.json`` (``--quick`` for a
short run). Both ways play greedy (NEW) against random (BASE), two players, the same deals, and
exactly ``--pairs`` pairs (the test is told not to stop on its decision). In process: the SDK
bots on the engine through ``scout_arena.local.play_match``, one game after another. As
processes: one venue of the tournament runner (an in-process referee on loopback, each bot a
subprocess speaking gRPC), ``--concurrency`` games at once. "wall" counts everything, the bots'
start-up included; "steady" counts from the first finished deal to the last, the rate a long
test runs at.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from scout_arena.sprt import SprtConfig, SprtRun, play_in_process, play_processes

JSON = dict[str, Any]


def measure(pairs: int, concurrency: int, in_process: bool) -> JSON:
    config = SprtConfig("greedy", "random", max_games=2 * pairs, seed=11,
                        concurrency=concurrency, decision_ms=5000, time_bank_ms=30_000)
    stamps: list[float] = []
    run = SprtRun(config, stop_on_decision=False,
                  on_update=lambda _run: stamps.append(time.perf_counter()))
    started = time.perf_counter()
    if in_process:
        play_in_process(run)
    else:
        with tempfile.TemporaryDirectory() as out:
            play_processes(run, Path(out))
    wall = time.perf_counter() - started
    assert run.deals == pairs, f"played {run.deals} of {pairs} pairs"
    steady = (pairs - 1) / (stamps[-1] - stamps[0]) if pairs > 1 and stamps[-1] > stamps[0] \
        else float("nan")
    return {"path": "in-process" if in_process else f"processes (concurrency {concurrency})",
            "pairs": pairs, "games": 2 * pairs, "wall_s": round(wall, 3),
            "pairs_per_s_wall": round(pairs / wall, 2), "pairs_per_s_steady": round(steady, 2),
            "estimate": round(run.test.mean, 3), "llr": round(run.test.llr, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/sprt.json"))
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    pairs = 30 if args.quick else args.pairs
    rows = [measure(pairs, args.concurrency, in_process=True),
            measure(pairs, args.concurrency, in_process=False)]
    inside, outside = rows
    ratio_wall = inside["pairs_per_s_wall"] / outside["pairs_per_s_wall"]
    ratio_steady = inside["pairs_per_s_steady"] / outside["pairs_per_s_steady"]
    table = Table(title=f"SPRT pairs (greedy vs random, 2 players, {pairs} pairs each way)")
    for column in ("path", "pairs", "wall s", "pairs/s (wall)", "pairs/s (steady)",
                   "NEW - BASE", "LLR"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for row in rows:
        table.add_row(row["path"], str(row["pairs"]), f"{row['wall_s']:.2f}",
                      f"{row['pairs_per_s_wall']:.1f}", f"{row['pairs_per_s_steady']:.1f}",
                      f"{row['estimate']:+.2f}", f"{row['llr']:+.1f}")
    console = Console(width=140)
    console.print(table)
    console.print(f"in process / processes: {ratio_wall:.1f}x (wall), {ratio_steady:.1f}x "
                  "(steady)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": platform.platform(), "quick": args.quick,
                                     "rows": rows, "ratio_wall": round(ratio_wall, 2),
                                     "ratio_steady": round(ratio_steady, 2)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
