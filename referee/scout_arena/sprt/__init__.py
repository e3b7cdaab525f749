"""`scout-arena sprt`: is NEW better than BASE? Play duplicate deals until the answer is known.

A sequential probability ratio test in the manner of cutechess-cli's and fastchess's ``-sprt``
and of fishtest's pentanomial GSPRT, on SCOUT's duplicate deals: every deal is played with NEW
and with BASE in the same seat against the same opponents, the paired differences are the data,
and after each deal the log-likelihood ratio of H1 (NEW - BASE = h1) against H0 (= h0) is
compared with Wald's bounds ``log(beta / (1 - alpha))`` and ``log((1 - beta) / alpha)``; the run
stops as soon as one is crossed or --max-games is reached.

* `stats`: the test (the formulas and their anchors are in its docstring);
* `design`: options, the deal groups and pairs, the paired values;
* `run`: folding results in, and the three ways of playing (in process, subprocesses through
  the tournament runner, other machines through `scout_arena.tournament.distributed`);
* `report`: the progress bar, the verdict, ``sprt.json`` and ``llr.png``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..record import JSON
from .design import (
    BASE,
    DEFAULT_H1,
    METRICS,
    NEW,
    DealGroup,
    GameResult,
    Pair,
    SprtConfig,
    deal_group,
    group_value,
    pair_value,
)
from .report import JSON_FILE, PNG_FILE, LlrProgress, render_result, write_json, write_plot
from .run import SprtError, SprtRun, play_in_process, play_on_nodes, play_processes
from .stats import Decision, SequentialTest, bounds

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "BASE", "DEFAULT_H1", "JSON_FILE", "METRICS", "NEW", "PNG_FILE", "DealGroup", "Decision",
    "GameResult", "LlrProgress", "Pair", "SequentialTest", "SprtConfig", "SprtError", "SprtRun",
    "bounds", "deal_group", "group_value", "pair_value", "play_in_process", "play_on_nodes",
    "play_processes", "render_result", "run_sprt", "write_json", "write_plot",
]

#: Where the subprocess paths keep the records and the bots' logs, inside --out.
GAMES_DIR = "games"


def run_sprt(config: SprtConfig, out: Path, *, in_process: bool = False,
             nodes: int | None = None, ray_address: str | None = None,
             console: Console | None = None, show_progress: bool = True, plot: bool = True) -> JSON:
    """Play the test one of the three ways, write ``sprt.json`` (and ``llr.png``) to ``out``
    and return the summary."""
    games = out / GAMES_DIR / "records"
    if not in_process and games.is_dir() and any(games.iterdir()):
        raise SprtError(f"{out} holds the games of an earlier test ({games}); choose another "
                        "--out or remove it")
    run = SprtRun(config)
    progress = LlrProgress(run, console) if show_progress and console is not None else None
    if progress is not None:
        run.on_update = progress.update
    with progress if progress is not None else contextlib.nullcontext():
        if in_process:
            play_in_process(run)
        elif nodes is not None or ray_address is not None:
            play_on_nodes(run, out / GAMES_DIR, nodes=nodes, ray_address=ray_address)
        else:
            play_processes(run, out / GAMES_DIR)
    summary = run.summary()
    summary["path"] = "in-process" if in_process else (
        "distributed" if nodes is not None or ray_address is not None else "processes")
    write_json(summary, out)
    if plot:
        write_plot(summary, out)
    return summary
