"""``tournament --nodes N`` against a local tournament, with where the CPU goes in each.

Run as ``.venv/bin/python bench/nodes_vs_local.py --json bench/results/nodes_vs_local.json``
(``--rounds R``: each mode R times, the modes alternating, medians shown; ``--games G``: 4G
matches per run). Each run is the real CLI in a fresh process (four greedy bots, 4-player
tables, duplicate deals). While it runs, /proc is sampled every 0.1 s for the CPU time of every
process of its tree, sorted by kind: the driver (the CLI: the in-process referee of a local run;
reading and writing records for ``--nodes``), the workers (one referee each) and the bots. From
the same samples: cores used (our CPU time over wall time), the busiest process's share of one
core (near 1: that process is the bottleneck), and the cores the rest of the machine used
meanwhile (other load steals cores, and shares them by runnable processes, so a mode with more
processes gets more of a contended machine: compare CPU seconds per match, not only wall time).
From the records: matches running at once on average (the concurrency reached), and start-up
(from the command's start to its first match).

Wall times on a shared machine vary by tens of percent from run to run, so ``vs local`` is
the median of the per-round ratios of a mode's wall time to the local run's with as many
matches at once (within a round the two ran back to back).

``--baseline DIR``: each ``--nodes`` mode also runs, in the same alternation, with the
packages of another checkout (``DIR``'s sources first on PYTHONPATH; make one with
``git worktree add --detach DIR REV``; its C extension is built first), as
``MODE @ baseline``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import build_native, source_path, write_json
from rich.console import Console
from rich.table import Table

JSON = dict[str, Any]
TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1
MODES: dict[str, list[str]] = {
    "local, 2 at once": ["--concurrency", "2"],
    "local, 4 at once": ["--concurrency", "4"],
    "--nodes 2 x 1 at once": ["--nodes", "2", "--concurrency", "1"],
    "--nodes 2 x 2 at once": ["--nodes", "2", "--concurrency", "2"],
    "--nodes 1 x 2 at once": ["--nodes", "1", "--concurrency", "2"],
}
BASELINE = " @ baseline"


def _stat(pid: int | str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


#: A process seen as one kind, then another, is the later one: a bot's first sample may be of
#: its parent forked, before its exec; an exiting process's command line may read empty.
_RANK = {"": 0, "other": 1, "driver": 2, "worker": 3, "bot": 4}


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
    if "tournament.worker" in command:
        return "worker"
    if " bot run " in command:
        return "bot"
    return "driver" if " tournament " in command else "other"


def _machine_busy() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / TICK


def run(mode: str, games: int, baseline: Path | None = None) -> JSON:
    out = Path(tempfile.mkdtemp(prefix="bench-nodes-"))
    env = dict(os.environ)
    if baseline is not None:
        env["PYTHONPATH"] = source_path(baseline, env.get("PYTHONPATH"))
    command = [sys.executable, "-m", "scout_arena.cli", "tournament", "--players", "4",
               "--games", str(games), "--seed", "7", "--decision-ms", "5000",
               "--time-bank-ms", "30000", "--no-progress", "--out", str(out / "t"),
               *[arg for i in range(4) for arg in ("--bot", f"greedy{i}=greedy")],
               *MODES[mode.removesuffix(BASELINE)]]
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    busy_before = _machine_busy()
    started_at = time.time()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=env)
    while process.poll() is None:
        parents: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (stat := _stat(name)) is not None:
                parents.setdefault(stat[0], []).append(int(name))
                if int(name) in kinds:
                    cpu[int(name)] = stat[1]
        tree = [process.pid]
        while tree:
            pid = tree.pop()
            if kinds.get(pid) != "bot":
                kinds[pid] = max(_kind(pid), kinds.get(pid, ""), key=_RANK.__getitem__)
                if (stat := _stat(pid)) is not None:
                    cpu[pid] = stat[1]
            tree.extend(parents.get(pid, []))
        time.sleep(0.1)
    wall = time.perf_counter() - started
    others = _machine_busy() - busy_before
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    summary = json.loads((out / "t" / "summary.json").read_text())
    spans = []
    for path in (out / "t" / "records").glob("*.json"):
        meta = json.loads(path.read_text())["meta"]
        spans.append((meta["created_at"], meta["ended_at"]))
    subprocess.run(["rm", "-rf", str(out)], check=True)
    by_kind: dict[str, float] = {}
    for pid, seconds in cpu.items():
        by_kind[kinds.get(pid) or "other"] = by_kind.get(kinds.get(pid) or "other", 0) + seconds
    ours = sum(by_kind.values())
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    matches = summary["matches_finished"]
    return {"mode": mode, "matches": matches, "wall_s": round(wall, 2),
            "matches_per_min": round(60 * matches / wall, 1),
            "startup_s": round(first - started_at, 2),
            "cpu_s": {k: round(v, 2) for k, v in sorted(by_kind.items())},
            "cpu_ms_per_match": round(1000 * ours / matches, 1),
            "cores_used": round(ours / wall, 2),
            "busiest_process_share": round(max(cpu.values()) / wall, 2),
            "other_load_cores": round(max(0.0, others - ours) / wall, 2),
            "matches_at_once": round(sum(e - s for s, e in spans) / (last - first), 2),
            "processes": {k: sum(1 for v in kinds.values() if v == k)
                          for k in sorted(set(kinds.values()))}}


def local_twin(mode: str) -> str | None:
    """The local mode with as many matches at once as ``mode``, if it is a --nodes one."""
    words = mode.removesuffix(BASELINE).split()
    if words[0] != "--nodes":
        return None
    return f"local, {int(words[1]) * int(words[3])} at once"


def ratio_to_local(runs: dict[str, list[JSON]], mode: str) -> float | None:
    twin = local_twin(mode)
    if twin is None or twin not in runs:
        return None
    return round(float(statistics.median(a["wall_s"] / b["wall_s"]
                                         for a, b in zip(runs[mode], runs[twin], strict=True))), 2)


def median_row(runs: list[JSON]) -> JSON:
    def med(key: str) -> float:
        return round(float(statistics.median(r[key] for r in runs)), 2)

    kinds = sorted({k for r in runs for k in r["cpu_s"]})
    return {"mode": runs[0]["mode"], "runs": len(runs), "matches": runs[0]["matches"],
            **{key: med(key) for key in ("wall_s", "matches_per_min", "startup_s",
                                         "cpu_ms_per_match", "cores_used",
                                         "busiest_process_share", "other_load_cores",
                                         "matches_at_once")},
            "cpu_s": {k: round(statistics.median(r["cpu_s"].get(k, 0) for r in runs), 2)
                      for k in kinds}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/nodes_vs_local.json"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--games", type=int, default=30, help="4 x G matches per run")
    parser.add_argument("--modes", nargs="*", choices=list(MODES), default=list(MODES))
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also run the --nodes modes with the packages of checkout DIR")
    args = parser.parse_args()
    if args.baseline is not None:
        build_native(args.baseline)
        args.modes += [m + BASELINE for m in args.modes if m.startswith("--nodes")]
    console = Console(width=160)
    runs: dict[str, list[JSON]] = {mode: [] for mode in args.modes}
    for round_ in range(args.rounds):
        order = args.modes if round_ % 2 == 0 else args.modes[::-1]
        for mode in order:
            row = run(mode, args.games, args.baseline if mode.endswith(BASELINE) else None)
            runs[mode].append(row)
            console.print(f"[dim]round {round_ + 1}: {mode}: {row['wall_s']} s wall, "
                          f"{row['cores_used']} cores, others {row['other_load_cores']}[/]")
    rows = [{**median_row(r), "wall_vs_local": ratio_to_local(runs, mode)}
            for mode, r in runs.items()]
    table = Table(title=f"--nodes against local: medians of {args.rounds} alternating runs, "
                        f"{rows[0]['matches']} greedy matches each, {CORES} cores")
    for column in ("mode", "wall s", "vs local", "matches/min", "start-up s", "at once",
                   "CPU ms/match", "driver s", "workers s", "bots s", "cores used", "busiest",
                   "other load"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for row in rows:
        cpu = row["cpu_s"]
        ratio = row["wall_vs_local"]
        table.add_row(row["mode"], f"{row['wall_s']:.1f}",
                      "" if ratio is None else f"{ratio:.2f}", f"{row['matches_per_min']:.0f}",
                      f"{row['startup_s']:.1f}", f"{row['matches_at_once']:.1f}",
                      f"{row['cpu_ms_per_match']:.0f}", f"{cpu.get('driver', 0):.1f}",
                      f"{cpu.get('worker', 0):.1f}", f"{cpu.get('bot', 0):.1f}",
                      f"{row['cores_used']:.2f}", f"{row['busiest_process_share']:.2f}",
                      f"{row['other_load_cores']:.2f}")
    console.print(table)
    console.print("vs local: median per-round ratio of wall time to the local run with as "
                  "many matches at once; busiest: CPU of the busiest process over wall time "
                  "(1.0 = one core saturated); other load: cores the rest of the machine used "
                  "meanwhile")
    write_json(args.json, {"machine": platform.platform(), "cores": CORES,
                           "rounds": args.rounds, "games": args.games,
                           "baseline": None if args.baseline is None else str(args.baseline),
                           "medians": rows,
                           "runs": runs}, console)


if __name__ == "__main__":
    main()
