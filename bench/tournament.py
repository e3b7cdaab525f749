"""Tournament benchmark: matches per minute with the bundled greedy bots at concurrency 1-8.

Side by side in the same run, at concurrency 8: the same greedy bots asked in worker threads
(``Bot.quick`` off, as the SDK asks any plain bot), the baseline of the SDK's inline path.

Also the share of CPU time spent in the referee versus the bot processes. Run as
``.venv/bin/python bench/tournament.py --json bench/results/tournament.json`` (``--quick`` for a
short run). Matches per minute count the playing time only (from every bot connected to the last
result), not the bots' start-up. Each concurrency level runs a real tournament (in-process referee,
one subprocess per bot) among four greedy bots at 4-player tables. CPU time of this process (the
referee and the scheduler) comes from ``getrusage(RUSAGE_SELF)``; CPU time of the bots from
``getrusage(RUSAGE_CHILDREN)`` once they have exited. The machine has 2 cores, so wall-clock
throughput flattens once the referee and the bots saturate them; the CPU shares say which side to
optimise.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import resource
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import write_json
from rich.console import Console
from rich.table import Table
from scout_arena.tournament import BotSpec, Tournament, TournamentConfig

JSON = dict[str, Any]
LEVELS = (1, 2, 4, 8)


def cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


THREADED = Path(__file__).resolve().parent / "bots" / "threaded_greedy.py"
HEADLINE = 8


def greedy_bots(threaded: bool) -> tuple[BotSpec, ...]:
    """The bundled greedy bots, or the same bots asked in worker threads (``Bot.quick`` off)."""
    if not threaded:
        return tuple(BotSpec(f"greedy{i}", "greedy") for i in range(4))
    command = shlex.join([sys.executable, "-m", "scout_arena.cli", "bot", "run",
                          f"{THREADED}:ThreadedGreedy"])
    return tuple(BotSpec(f"threaded{i}", command) for i in range(4))


def run_level(concurrency: int, games: int, threaded: bool = False) -> JSON:
    bots = greedy_bots(threaded)
    config = TournamentConfig(bots, players=4, games=games, concurrency=concurrency, seed=7,
                              decision_ms=5000, time_bank_ms=30_000)
    with tempfile.TemporaryDirectory() as out:
        tournament = Tournament(config, Path(out), show_progress=False)
        self_before = cpu(resource.RUSAGE_SELF)
        children_before = cpu(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        summary = asyncio.run(tournament.run())
        wall = time.perf_counter() - started
        referee_cpu = cpu(resource.RUSAGE_SELF) - self_before
        bots_cpu = cpu(resource.RUSAGE_CHILDREN) - children_before
    matches = summary["matches_finished"]
    play = summary["play_s"]
    total_cpu = referee_cpu + bots_cpu
    return {
        "concurrency": concurrency, "bots": "threaded" if threaded else "quick",
        "matches": matches, "wall_s": round(wall, 3),
        "play_s": play, "matches_per_min": round(60 * matches / play, 1),
        "referee_cpu_s": round(referee_cpu, 3), "bots_cpu_s": round(bots_cpu, 3),
        "referee_share": round(referee_cpu / total_cpu, 3) if total_cpu else None,
        "timeouts": sum(row["timeouts"] for row in summary["standings"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/tournament.json"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    games = 3 if args.quick else 12
    rows = [run_level(level, games) for level in LEVELS]
    base = rows[0]["matches_per_min"]
    threaded = run_level(HEADLINE, games, threaded=True)
    table = Table(title="Tournament throughput: four greedy bots, 4-player tables, duplicate deals")
    for column in ("concurrency", "matches", "wall s", "playing s", "matches/min",
                   "vs concurrency 1", "referee CPU s", "bots CPU s", "referee share", "timeouts"):
        table.add_column(column, justify="right")
    for row in rows:
        row["speedup_vs_1"] = round(row["matches_per_min"] / base, 2) if base else None
        table.add_row(str(row["concurrency"]), str(row["matches"]), f"{row['wall_s']:.2f}",
                      f"{row['play_s']:.2f}",
                      f"{row['matches_per_min']:.0f}", f"{row['speedup_vs_1']:.2f}x",
                      f"{row['referee_cpu_s']:.2f}", f"{row['bots_cpu_s']:.2f}",
                      f"{100 * row['referee_share']:.0f}%", str(row["timeouts"]))
    Console(width=140).print(table)
    headline = next(r for r in rows if r["concurrency"] == HEADLINE)
    ratio = headline["matches_per_min"] / threaded["matches_per_min"]
    Console(width=140).print(
        f"Same run, concurrency {HEADLINE}, the greedy bots asked in worker threads (Bot.quick "
        f"off, the SDK's path for plain bots): {threaded['matches_per_min']:.0f} matches/min, "
        f"bots CPU {threaded['bots_cpu_s']:.2f} s; the quick bots play {ratio:.2f}x as fast.")
    write_json(args.json, {"machine": platform.platform(), "quick": args.quick, "levels": rows,
                           "threaded_baseline": threaded, "quick_vs_threaded": round(ratio, 3)})


if __name__ == "__main__":
    main()
