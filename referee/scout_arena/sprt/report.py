"""What a person sees of an SPRT: the live LLR bar, the verdict, and the files in --out
(``sprt.json`` with every point of the LLR path, ``llr.png`` drawing it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ..record import JSON
from .run import SprtRun

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["JSON_FILE", "PNG_FILE", "LlrProgress", "render_result", "write_json", "write_plot"]

JSON_FILE = "sprt.json"
PNG_FILE = "llr.png"
#: The bar's resolution: it runs from the lower bound (empty) to the upper one (full).
_STEPS = 1000


class _Fields(TypedDict):
    """The bar's text fields (rich's task fields)."""

    lower: str
    upper: str
    llr: str
    estimate: str
    games: str


def _unit(metric: str) -> str:
    return "points" if metric == "score" else "win rate"


def _fmt(metric: str, value: float) -> str:
    return f"{value:+.2f}" if metric == "score" else f"{100 * value:+.1f}%"


class LlrProgress:
    """A rich progress bar whose fill is the LLR between its bounds (empty: H0 accepted, full:
    H1 accepted), with the LLR, the bounds, the games and the running estimate beside it."""

    def __init__(self, run: SprtRun, console: Console) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.run = run
        self.lower, self.upper = run.test.bounds
        self.progress = Progress(
            TextColumn("[bold]SPRT[/bold] H0 [red]{task.fields[lower]}[/red]"), BarColumn(),
            TextColumn("H1 [green]{task.fields[upper]}[/green]  LLR [bold]{task.fields[llr]}"),
            TextColumn("{task.fields[games]} games"), TextColumn("{task.fields[estimate]}"),
            TimeElapsedColumn(), console=console, transient=False)
        self.task = self.progress.add_task("sprt", total=_STEPS, **self._fields())
        self.progress.update(self.task, completed=self._position())

    def _position(self) -> float:
        share = (self.run.test.llr - self.lower) / (self.upper - self.lower)
        return _STEPS * min(1.0, max(0.0, share))

    def _fields(self) -> _Fields:
        run, test = self.run, self.run.test
        metric = run.config.metric
        estimate = f"diff {_fmt(metric, test.mean)}" if test.n else ""
        return {"lower": f"{self.lower:.2f}", "upper": f"{self.upper:+.2f}",
                "llr": f"{test.llr:+.2f}", "estimate": estimate,
                "games": str(run.games_played)}

    def update(self, run: SprtRun) -> None:
        self.progress.update(self.task, completed=self._position(), **self._fields())

    def __enter__(self) -> LlrProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)


def measured(summary: JSON) -> str:
    """NEW - BASE as measured, with its 95 % interval when there is one."""
    metric = summary["config"]["metric"]
    if summary["estimate"] is None:
        return "no deal finished"
    ci = summary["ci95"]
    interval = f", 95% CI [{_fmt(metric, ci[0])}, {_fmt(metric, ci[1])}]" if ci else ""
    return f"measured NEW - BASE = {_fmt(metric, summary['estimate'])} {_unit(metric)}{interval}"


def verdict(summary: JSON) -> str:
    """Which hypothesis won, in words, then the measured difference: the hypotheses' values
    are what was tested, never a measurement, so they come last and are named as such."""
    decision = summary["decision"]
    config = summary["config"]
    metric = config["metric"]
    h0, h1 = _fmt(metric, config["h0"]), _fmt(metric, config["h1"])
    tested = f"(tested H0: NEW - BASE = {h0} against H1: {h1})"
    if decision == "H1":
        return f"H1 accepted: NEW is better than BASE; {measured(summary)} {tested}"
    if decision == "H0":
        return (f"H0 accepted: NEW is not {h1} {_unit(metric)} better than BASE; "
                f"{measured(summary)} {tested}")
    if summary["interrupted"]:
        return f"interrupted before a decision; {measured(summary)} {tested}"
    return f"no decision within --max-games; {measured(summary)} {tested}"


def render_result(summary: JSON, console: Console, out: Path | None = None) -> None:
    from rich.table import Table

    config = summary["config"]
    metric = config["metric"]
    lower, upper = summary["bounds"]
    colour = {"H1": "green", "H0": "red"}.get(summary["decision"] or "", "yellow")
    console.print(f"[bold {colour}]{verdict(summary)}[/bold {colour}]")
    table = Table(show_header=False)
    table.add_column(justify="left")
    table.add_column(justify="right")
    h = f"H0 {_fmt(metric, config['h0'])} vs H1 {_fmt(metric, config['h1'])} " \
        f"({_unit(metric)}), alpha {config['alpha']:g}, beta {config['beta']:g}"
    table.add_row("hypotheses", h)
    table.add_row("LLR (bounds)", f"{summary['llr']:+.3f} ({lower:+.3f}, {upper:+.3f})")
    if summary["estimate"] is not None:
        ci = summary["ci95"]
        interval = f" [{_fmt(metric, ci[0])}, {_fmt(metric, ci[1])}]" if ci else ""
        table.add_row("NEW - BASE (95% CI)", f"{_fmt(metric, summary['estimate'])}{interval}")
    table.add_row("deals (pairs)", f"{summary['deals']} ({summary['pairs']})")
    table.add_row("games used", f"{summary['games_used']} of {summary['games_played']} played "
                  f"(at most {summary['games_limit']}: --max-games {config['max_games']} in "
                  f"whole deals of {summary['deal_games']})")
    table.add_row("elapsed", f"{summary['elapsed_s']:.1f} s")
    console.print(table)
    for name, count in sorted(summary["forfeits"].items()):
        console.print(f"[yellow]{name} forfeited {count} game(s)[/yellow]: its seat was played "
                      "by the referee's fallback there")
    for note in summary.get("notes", []):
        console.print(f"[yellow]note[/yellow]: {note}")
    if out is not None:
        console.print(f"LLR path and data: {out / PNG_FILE}, {out / JSON_FILE}")


def write_json(summary: JSON, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / JSON_FILE

    def clean(value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    path.write_text(json.dumps(clean(summary), indent=1) + "\n", encoding="utf-8")
    return path


def write_plot(summary: JSON, out: Path) -> Path:
    """The LLR after every deal against the games played, with both bounds; headless (Agg)."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise RuntimeError("the LLR plot needs matplotlib: pip install 'scout-arena[sprt]'") \
            from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    path = out / PNG_FILE
    config = summary["config"]
    lower, upper = summary["bounds"]
    games = [0] + [p["games"] for p in summary["history"]]
    llrs = [0.0] + [p["llr"] for p in summary["history"]]
    figure = Figure(figsize=(8, 4.5), dpi=100)
    axes = figure.add_subplot()
    axes.plot(games, llrs, color="tab:blue", linewidth=1.5, label="LLR")
    axes.axhline(upper, color="tab:green", linestyle="--", label=f"accept H1 ({upper:+.2f})")
    axes.axhline(lower, color="tab:red", linestyle="--", label=f"accept H0 ({lower:+.2f})")
    axes.axhline(0, color="grey", linewidth=0.5)
    axes.set_xlabel("games")
    axes.set_ylabel("log-likelihood ratio")
    metric = config["metric"]
    outcome = {"H1": "H1 accepted", "H0": "H0 accepted"}.get(summary["decision"] or "",
                                                              "no decision")
    axes.set_title(f"SPRT, {config['players']} players, {_unit(metric)}: H0 "
                   f"{_fmt(metric, config['h0'])} vs H1 {_fmt(metric, config['h1'])}; "
                   f"{outcome} after {summary['games_used']} games", fontsize=10)
    axes.legend(loc="best", fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    return path
