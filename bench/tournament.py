"""Tournament benchmark: matches per minute with the bundled greedy bots at concurrency 1-8.

Side by side in the same run, at concurrency 8: the same greedy bots asked in worker threads
(``Bot.quick`` off, as the SDK asks any plain bot), the baseline of the SDK's inline path; and
the code of an earlier commit (``--baseline REV``, by default the one issue 12 measured at 295
matches/min, "today's" speed its target doubles): its tree is exported with ``git archive`` into
a cache folder with a virtualenv of its own (built once), and its own ``bench/tournament.py``
level 8 alternates with ours, ``--pairs`` times, each in a fresh process. The machine's speed
drifts by tens of percent between runs, so the figure to read is the median of the per-pair
ratios, not either absolute rate (``--no-baseline`` skips it).

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
import json
import platform
import resource
import shlex
import statistics
import subprocess
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
REPO = Path(__file__).resolve().parent.parent
BASELINE_REV = "ed9892f"
"""The last commit of stop 8, whose bench issue 12 quotes (295 matches/min at concurrency 8)."""
TARGET_SPEEDUP = 2.0
LEVEL_SCRIPT = ("import json, sys; sys.path.insert(0, 'bench'); import tournament; "
                "print(json.dumps(tournament.run_level({level}, {games})))")


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
        summary = asyncio.run(tournament.run()).to_json()
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


def baseline_tree(rev: str) -> Path:
    """A checkout of ``rev`` with its own virtualenv, made once in the temp folder."""
    sha = subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    root = Path(tempfile.gettempdir()) / f"scout-arena-baseline-{sha}"
    python = root / ".venv" / "bin" / "python"
    if (root / ".ready").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", sha], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(root / ".venv")], check=True)
    editable = [arg for path in ("proto/python", "clients/python", ".")
                if (root / path / "pyproject.toml").exists() for arg in ("-e", path)]
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *editable], cwd=root,
                   check=True)
    (root / ".ready").touch()
    return root


def level_in(root: Path, python: Path, level: int, games: int) -> JSON:
    """One level of ``root``'s own bench/tournament.py, in a process of ``python``."""
    done = subprocess.run([str(python), "-c", LEVEL_SCRIPT.format(level=level, games=games)],
                          cwd=root, check=True, capture_output=True, text=True, timeout=900)
    result: JSON = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def against_baseline(rev: str, pairs: int, games: int) -> JSON:
    """Our level 8 and ``rev``'s, alternating, each in a fresh process."""
    root = baseline_tree(rev)
    rows = []
    for _ in range(pairs):
        old = level_in(root, root / ".venv" / "bin" / "python", HEADLINE, games)
        new = level_in(REPO, Path(sys.executable), HEADLINE, games)
        rows.append({"baseline": old["matches_per_min"], "ours": new["matches_per_min"],
                     "ratio": round(new["matches_per_min"] / old["matches_per_min"], 3)})
    ratios = [row["ratio"] for row in rows]
    return {"rev": rev, "pairs": rows, "median_ratio": statistics.median(ratios),
            "median_baseline": statistics.median(r["baseline"] for r in rows),
            "median_ours": statistics.median(r["ours"] for r in rows),
            "target": TARGET_SPEEDUP}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/tournament.json"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", default=BASELINE_REV, metavar="REV",
                        help=f"the commit to compare with (default {BASELINE_REV})")
    parser.add_argument("--pairs", type=int, default=4,
                        help="baseline/ours runs of level 8, alternating (default 4)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the comparison with the baseline commit")
    parser.add_argument("--baseline-only", action="store_true",
                        help="only the comparison with the baseline commit")
    args = parser.parse_args()
    games = 3 if args.quick else 12
    if args.baseline_only:
        only = against_baseline(args.baseline, args.pairs, games)
        print_baseline(only)
        write_json(args.json, {"machine": platform.platform(), "quick": args.quick,
                               "baseline": only})
        return
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
    compared = None if args.no_baseline else against_baseline(args.baseline, args.pairs, games)
    if compared is not None:
        print_baseline(compared)
    write_json(args.json, {"machine": platform.platform(), "quick": args.quick, "levels": rows,
                           "threaded_baseline": threaded, "quick_vs_threaded": round(ratio, 3),
                           "baseline": compared})


def print_baseline(compared: JSON) -> None:
    table = Table(title=f"Concurrency {HEADLINE}: this tree against {compared['rev']}, "
                        f"alternating runs")
    for column in ("pair", f"{compared['rev']} matches/min", "ours matches/min", "ours / base"):
        table.add_column(column, justify="right")
    for index, row in enumerate(compared["pairs"], 1):
        table.add_row(str(index), f"{row['baseline']:.0f}", f"{row['ours']:.0f}",
                      f"{row['ratio']:.2f}x")
    console = Console(width=140)
    console.print(table)
    verdict = "MET" if compared["median_ratio"] >= compared["target"] else "NOT MET"
    console.print(f"median ratio {compared['median_ratio']:.2f}x (target "
                  f"{compared['target']:.1f}x: {verdict}); medians "
                  f"{compared['median_baseline']:.0f} vs {compared['median_ours']:.0f} "
                  f"matches/min")


if __name__ == "__main__":
    main()
