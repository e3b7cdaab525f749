"""`bench/engine.py --against REV`: the rules engine of this tree and of REV, side by side.

Each side runs in its own fresh process (``python bench/engine.py --child ...``) with
``PYTHONPATH`` set to that side's ``referee/rules/src``, so the same benchmark code drives each
side's rules engine; REV is checked out in a temporary git worktree. Runs alternate between the
sides, player count by player count, and the tables give each side's medians and their ratio:
machine load moves both alike. Two measures:

- actions per CPU second of whole random matches (this tree's `engine.random_playout`: the
  uniform-random-kind policy on observations, as ``bench/engine.py`` plays them);
- the bundled search bot's iterations per CPU second (each side's own `scout_arena.search.mcts`
  and rollout policy on its own engine: ``PYTHONPATH`` also holds that side's ``referee`` and
  SDK; 200 iterations a decision, at positions a few random actions into a deal's first round),
  and the action it chooses at each: the same on both sides while the search plays the same.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import worktree, write_json
from rich.console import Console
from rich.table import Table

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
THIS = "this tree"


SEARCH_ITERATIONS = 200
SEARCH_POSITIONS, QUICK_SEARCH_POSITIONS = 12, 3  # per player count


def add_against_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", metavar="REV", help="this tree's engine and REV's side by "
                        "side (throughput and search speed) instead of the usual figures")
    parser.add_argument("--repeat", type=int, default=3, help="with --against: runs a side")
    parser.add_argument("--child", choices=tuple(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("--players", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)


def against_main(args: argparse.Namespace, matches: dict[int, int], console: Console) -> int:
    """``--child``: one measurement, printed as JSON; ``--against``: the side-by-side run."""
    if args.child:
        print(json.dumps(child(args.child, args.players, args.count)))
        return 0
    started = time.perf_counter()
    positions = QUICK_SEARCH_POSITIONS if args.quick else SEARCH_POSITIONS
    data = side_by_side(args.against, (3, 4, 5),
                        {"engine": matches, "search": dict.fromkeys((3, 4, 5), positions)},
                        args.repeat, console)
    data["elapsed_s"] = time.perf_counter() - started
    if args.json:
        write_json(args.json, data, console)
    return 0


def child(kind: str, players: int, count: int) -> JSON:
    """One measurement in this process, on the engine found first on ``sys.path``."""
    import scout_rules
    from scout_rules import moves

    row = search_run(players, count) if kind == "search" else throughput_run(players, count)
    row["engine_path"] = scout_rules.__file__
    if kind == "search":
        from scout_arena.search import mcts

        row["search_path"] = mcts.__file__
    row["compiled"] = bool(getattr(moves, "COMPILED", False))
    return row


def throughput_run(players: int, matches: int) -> JSON:
    from engine import run_matches

    run_matches(players, list(range(5_000, 5_003)))
    result: JSON = run_matches(players, list(range(1, matches + 1)))
    return result


def search_run(players: int, positions: int) -> JSON:
    """`search` from ``positions`` positions (deal seeds 1, 2, ...), CPU time of the searches."""
    import random

    from scout_arena.search.mcts import search
    from scout_rules import InformationSet, State

    chosen: list[str] = []
    iterations = 0
    cpu = 0
    seed = 0
    while len(chosen) < positions:
        seed += 1
        rng = random.Random(seed)
        state = State.new(players, seed)
        for seat in range(players):
            state.choose_rotation(seat, rng.random() < 0.5)
        for _ in range(rng.randrange(8)):
            state.apply(rng.choice(state.legal_actions()))
            if state.round_index or state.is_over:
                break
        actor = state.current_seat
        if state.round_index or actor is None:
            continue
        info = InformationSet.from_observation(state.observation(actor))
        c0 = time.process_time_ns()
        result = search(info, random.Random(seed), iterations=SEARCH_ITERATIONS, deadline=None)
        cpu += time.process_time_ns() - c0
        assert result is not None
        iterations += result.iterations
        chosen.append(str(result.action))
    return {"players": players, "positions": positions, "iterations": iterations,
            "cpu_seconds": cpu / 1e9, "iterations_per_cpu_s": iterations / (cpu / 1e9),
            "chosen": chosen}


def run_child(source: Path, kind: str, players: int, count: int) -> JSON:
    """One run in a fresh process on ``source``'s engine."""
    path = [source / "referee/rules/src", source / "referee", source / "clients/python/src"]
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(map(str, path)))
    out = subprocess.run([sys.executable, str(ROOT / "bench/engine.py"), "--child", kind,
                          "--players", str(players), "--count", str(count)],
                         env=env, check=True, capture_output=True, text=True, timeout=900)
    result: JSON = json.loads(out.stdout.strip().splitlines()[-1])
    expected = (source / "referee/rules/src/scout_rules").resolve()
    if Path(result["engine_path"]).resolve().parent != expected:
        raise SystemExit(f"the child ran {result['engine_path']}, not {expected}")
    searched = Path(result.get("search_path", source / "referee/scout_arena/search/mcts.py"))
    if searched.resolve().parent != (source / "referee/scout_arena/search").resolve():
        raise SystemExit(f"the child searched with {searched}, not {source}'s search")
    return result


MEASURES = {"engine": ("decisions_per_cpu_s", "actions per CPU second, random matches"),
            "search": ("iterations_per_cpu_s", f"search iterations per CPU second "
                                                f"({SEARCH_ITERATIONS} a decision)")}


def side_by_side(revision: str, player_counts: Sequence[int], counts: dict[str, dict[int, int]],
                 repeat: int, console: Console) -> JSON:
    """Alternate runs of this tree and ``revision``; medians and ratios per player count, for
    each measure in ``counts`` (matches, or search positions, per player count)."""
    with tempfile.TemporaryDirectory(prefix="scout-engine-against-") as tmp:
        sides = {THIS: ROOT, revision: worktree(revision, Path(tmp))}
        runs: dict[str, dict[str, dict[int, list[JSON]]]] = {
            kind: {s: {n: [] for n in player_counts} for s in sides} for kind in counts}
        try:
            for _ in range(repeat):
                for kind, per_count in counts.items():
                    field = MEASURES[kind][0]
                    for n in player_counts:
                        for name, source in sides.items():
                            row = run_child(source, kind, n, per_count[n])
                            runs[kind][name][n].append(row)
                            console.print(f"[dim]{kind}, {name}, {n} players: "
                                          f"{row[field]:,.0f} (compiled: {row['compiled']})[/]")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(sides[revision])], check=False, capture_output=True)
    out: JSON = {"against": revision, "repeat": repeat, "runs": runs}
    for kind in counts:
        out[kind] = report(kind, revision, player_counts, counts[kind], runs[kind], repeat,
                           console)
    console.print("[dim]an action is one applied action (rotation choices not counted); the "
                  "same benchmark code and seeds drive both engines, each in a fresh process "
                  "with PYTHONHASHSEED=0; medians of the runs, CPU time of the process[/]")
    return out


def report(kind: str, revision: str, player_counts: Sequence[int], counts: dict[int, int],
           runs: dict[str, dict[int, list[JSON]]], repeat: int, console: Console) -> list[JSON]:
    field, what = MEASURES[kind]
    rows = []
    table = Table(title=f"{what[0].upper()}{what[1:]}: this tree against {revision} "
                        f"({repeat} alternating runs a side)")
    for col in ("n", "runs of", "this tree", "each run", revision, "each run", "ratio"):
        table.add_column(col, justify="right")
    table.add_column("compiled", justify="right")
    if kind == "search":
        table.add_column("same moves", justify="right")
    for n in player_counts:
        ours = [r[field] for r in runs[THIS][n]]
        theirs = [r[field] for r in runs[revision][n]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        row: JSON = {"players": n, "count": counts[n], "this_tree": statistics.median(ours),
                     "against": statistics.median(theirs), "ratio": ratio,
                     "compiled": runs[THIS][n][0]["compiled"],
                     "against_compiled": runs[revision][n][0]["compiled"]}
        cells = [str(n), str(counts[n]), f"{statistics.median(ours):,.0f}",
                 " ".join(f"{x / 1000:.1f}k" for x in ours), f"{statistics.median(theirs):,.0f}",
                 " ".join(f"{x / 1000:.1f}k" for x in theirs), f"{ratio:.2f}x",
                 f"{yes_no(runs[THIS][n][0]['compiled'])}/"
                 f"{yes_no(runs[revision][n][0]['compiled'])}"]
        if kind == "search":
            row["same_moves"] = all(r["chosen"] == runs[revision][n][0]["chosen"]
                                    for side in runs.values() for r in side[n])
            cells.append(yes_no(row["same_moves"]))
        rows.append(row)
        table.add_row(*cells)
    console.print(table)
    return rows


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"
