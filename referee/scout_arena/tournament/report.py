"""What a person sees of a tournament: the live progress bar and the final rich tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .summary import TournamentSummary

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(console: Console | None) -> Progress:
    """Done/total, rate, ETA and the current leader, redrawn as matches finish."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    TextColumn("leader: {task.fields[leader]}"), console=console,
                    transient=False)


def render_summary(summary: TournamentSummary, console: Console) -> None:
    """Standings and the head-to-head crosstable as rich tables."""
    from rich.table import Table

    done, total = summary.matches_finished, summary.matches_total
    title = f"Standings after {done}/{total} matches"
    if summary.interrupted:
        title += " (interrupted: resume with --resume)"
    table = Table(title=title)
    for col in ("#", "bot", "mu-3sigma", "mu", "sigma", "games", "mean score (95% CI)", "win %",
                "mean rank", "timeouts", "illegal", "forfeits"):
        table.add_column(col, justify="left" if col == "bot" else "right")
    for i, row in enumerate(summary.standings, 1):
        ci = row.mean_score_ci95
        score = f"{row.mean_score:+.2f} ± {ci:.2f}" if ci is not None else \
            f"{row.mean_score:+.2f}"
        win = f"{100 * row.win_rate:.1f}" if row.win_rate is not None else "-"
        rank = f"{row.mean_rank:.2f}" if row.mean_rank is not None else "-"
        table.add_row(str(i), row.bot, f"{row.mu_minus_3sigma:.2f}", f"{row.mu:.2f}",
                      f"{row.sigma:.2f}", str(row.matches), score, win, rank,
                      str(row.timeouts), str(row.illegal_actions), str(row.forfeits))
    console.print(table)
    names = [row.bot for row in summary.standings]
    cross = Table(title="Head to head: share of encounters the row bot finished ahead "
                        "(ties count half)")
    cross.add_column("")
    for name in names:
        cross.add_column(name, justify="right")
    for a in names:
        cells = []
        for b in names:
            v = summary.head_to_head[a].get(b) if a != b else None
            cells.append("-" if v is None else f"{100 * v:.0f}%")
        cross.add_row(a, *cells)
    console.print(cross)
    from rich.markup import escape

    for row in summary.standings:
        for note in row.notes:  # a bot's stderr may hold what rich reads as markup
            console.print(f"[yellow]{escape(row.bot)}[/yellow]: {escape(note)}")
