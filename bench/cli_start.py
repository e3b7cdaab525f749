"""How long `scout-arena` takes to answer its small commands (issue 29: every command took
1.2-1.7 s, even `--help`; the goal is under 0.3 s for `--help` and `ladder --help`).

Each command runs REPEATS times as a fresh process; the table shows the median CPU time
(user + system, which a busy machine does not inflate much) and the median wall time.
Writes bench/results/cli_start.json (or --json PATH).

    python bench/cli_start.py [--repeats N] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import write_json
from rich.console import Console
from rich.table import Table

SCOUT_ARENA = str(Path(sys.executable).with_name("scout-arena"))
GOAL_S = 0.3
COMMANDS = (
    ("--help",),
    ("ladder", "--help"),
    ("play", "--help"),
    ("tournament", "--help"),
    ("bot", "run", "--help"),
    ("replay", "--help"),
    ("deal", "--players", "2"),
)
#: The commands the goal is about.
GOAL_COMMANDS = {("--help",), ("ladder", "--help")}


def measure(argv: tuple[str, ...]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([SCOUT_ARENA, *argv], stdout=subprocess.DEVNULL, check=True,
                   env={**os.environ, "COLUMNS": "100"})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" /
                                              "cli_start.json"))
    args = parser.parse_args()
    console = Console()
    rows: list[dict[str, Any]] = []
    for argv in COMMANDS:
        measure(argv)  # a first run warms the file cache and writes any .pyc
        runs = [measure(argv) for _ in range(args.repeats)]
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        rows.append({"command": " ".join(argv), "cpu_s": round(cpu, 3),
                     "wall_s": round(wall, 3), "goal": argv in GOAL_COMMANDS})
    table = Table(title=f"scout-arena start-up, median of {args.repeats} runs")
    for column in ("command", "CPU s", "wall s", f"goal < {GOAL_S} s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for row in rows:
        verdict = ("met" if row["cpu_s"] < GOAL_S else "MISSED") if row["goal"] else ""
        table.add_row(f"scout-arena {row['command']}", f"{row['cpu_s']:.3f}",
                      f"{row['wall_s']:.3f}", verdict)
    console.print(table)
    write_json(args.json, {"repeats": args.repeats, "goal_s": GOAL_S, "commands": rows}, console)


if __name__ == "__main__":
    main()
