"""`bench/engine.py --against REV`: the match throughput of this tree and of REV, side by side.

Each side runs in its own fresh process (``python bench/engine.py --child ...``) with
``PYTHONPATH`` set to that side's ``referee/rules/src``, so the same benchmark code (this tree's
`engine.random_playout`) drives each side's rules engine; REV is checked out in a temporary git
worktree. Runs alternate between the sides, player count by player count, and the table gives
each side's median actions per CPU second and their ratio: machine load moves both alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
THIS = "this tree"


def run_child(source: Path, players: int, matches: int) -> JSON:
    """One throughput run of ``matches`` matches in a fresh process on ``source``'s engine."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(source / "referee/rules/src"))
    out = subprocess.run([sys.executable, str(ROOT / "bench/engine.py"), "--child",
                          "--players", str(players), "--matches", str(matches)],
                         env=env, check=True, capture_output=True, text=True, timeout=900)
    result: JSON = json.loads(out.stdout.strip().splitlines()[-1])
    expected = (source / "referee/rules/src/scout_rules").resolve()
    if Path(result["engine_path"]).resolve().parent != expected:
        raise SystemExit(f"the child ran {result['engine_path']}, not {expected}")
    return result


def worktree(revision: str, into: Path) -> Path:
    path = into / "against"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path),
                    revision], check=True, capture_output=True)
    return path


def side_by_side(revision: str, player_counts: Sequence[int], matches: dict[int, int],
                 repeat: int, console: Console) -> JSON:
    """Alternate runs of this tree and ``revision``; medians and ratios per player count."""
    with tempfile.TemporaryDirectory(prefix="scout-engine-against-") as tmp:
        sides = {THIS: ROOT, revision: worktree(revision, Path(tmp))}
        runs: dict[str, dict[int, list[JSON]]] = {s: {n: [] for n in player_counts}
                                                  for s in sides}
        try:
            for _ in range(repeat):
                for n in player_counts:
                    for name, source in sides.items():
                        row = run_child(source, n, matches[n])
                        runs[name][n].append(row)
                        console.print(f"[dim]{name}, {n} players: "
                                      f"{row['decisions_per_cpu_s']:,.0f} actions/CPU-s "
                                      f"(compiled: {row['compiled']})[/]")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(sides[revision])], check=False, capture_output=True)
    rows = []
    table = Table(title=f"Actions per CPU second, random matches, this tree against {revision} "
                        f"({repeat} alternating runs a side)")
    for col in ("n", "matches", "this tree", "each run", revision, "each run", "ratio"):
        table.add_column(col, justify="right")
    for n in player_counts:
        ours = [r["decisions_per_cpu_s"] for r in runs[THIS][n]]
        theirs = [r["decisions_per_cpu_s"] for r in runs[revision][n]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        rows.append({"players": n, "matches": matches[n], "this_tree": statistics.median(ours),
                     "against": statistics.median(theirs), "ratio": ratio,
                     "this_tree_runs": ours, "against_runs": theirs,
                     "compiled": runs[THIS][n][0]["compiled"]})
        table.add_row(str(n), str(matches[n]), f"{statistics.median(ours):,.0f}",
                      " ".join(f"{x / 1000:.1f}k" for x in ours),
                      f"{statistics.median(theirs):,.0f}",
                      " ".join(f"{x / 1000:.1f}k" for x in theirs), f"{ratio:.2f}x")
    console.print(table)
    console.print("[dim]an action is one applied action (rotation choices not counted); the "
                  "same benchmark code and seeds drive both engines, each in a fresh process "
                  "with PYTHONHASHSEED=0; medians of the runs[/]")
    return {"against": revision, "repeat": repeat, "rows": rows, "runs": runs}
