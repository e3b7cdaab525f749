"""What a tournament ends with: the standings, the head-to-head shares and where the records
are, as typed values; `TournamentSummary.to_json` is the one place they become summary.json."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..record import JSON
from .standings import BotStats


@dataclass(frozen=True, slots=True)
class Standing:
    """One bot's line of the standings (rounded as summary.json shows it)."""

    bot: str
    command: str
    mu: float
    sigma: float
    mu_minus_3sigma: float
    matches: int
    mean_score: float
    mean_score_ci95: float | None
    """None while the interval is unbounded (fewer than two matches)."""
    win_rate: float | None
    mean_rank: float | None
    timeouts: int
    illegal_actions: int
    forfeits: int
    status: str
    notes: tuple[str, ...]

    @classmethod
    def of(cls, stats: BotStats, command: str, status: str, notes: Sequence[str]) -> Standing:
        mean, half = stats.mean_score_ci()
        return cls(
            bot=stats.name, command=command, mu=round(stats.mu, 3),
            sigma=round(stats.sigma, 3), mu_minus_3sigma=round(stats.conservative, 3),
            matches=stats.matches, mean_score=round(mean, 3),
            mean_score_ci95=None if math.isinf(half) else round(half, 3),
            win_rate=round(stats.wins / stats.matches, 4) if stats.matches else None,
            mean_rank=round(statistics.fmean(stats.ranks), 3) if stats.ranks else None,
            timeouts=stats.timeouts, illegal_actions=stats.illegal_actions,
            forfeits=stats.forfeits, status=status, notes=tuple(notes))

    def to_json(self) -> JSON:
        return {"bot": self.bot, "command": self.command, "mu": self.mu, "sigma": self.sigma,
                "mu_minus_3sigma": self.mu_minus_3sigma, "matches": self.matches,
                "mean_score": self.mean_score, "mean_score_ci95": self.mean_score_ci95,
                "win_rate": self.win_rate, "mean_rank": self.mean_rank,
                "timeouts": self.timeouts, "illegal_actions": self.illegal_actions,
                "forfeits": self.forfeits, "status": self.status, "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class TournamentSummary:
    """A tournament's result, best bot first (by mu - 3 sigma)."""

    config: JSON
    matches_total: int
    matches_finished: int
    interrupted: bool
    elapsed_s: float
    play_s: float
    standings: tuple[Standing, ...]
    head_to_head: Mapping[str, Mapping[str, float | None]]
    """Row bot -> column bot -> share of encounters the row bot finished ahead (None: never
    met)."""
    records: tuple[str, ...]
    """Record paths relative to the tournament folder, in schedule order."""
    error: str | None = None
    """Why a distributed run could not play everything."""
    faults: tuple[JSON, ...] = ()
    """Node faults of a distributed run (`distributed.NodeFault`), in order: a run that lost
    a node says so here, not only on the console."""

    def to_json(self) -> JSON:
        out: JSON = {
            "config": self.config, "matches_total": self.matches_total,
            "matches_finished": self.matches_finished, "interrupted": self.interrupted,
            "elapsed_s": self.elapsed_s, "play_s": self.play_s,
            "standings": [s.to_json() for s in self.standings],
            "head_to_head": {a: dict(row) for a, row in self.head_to_head.items()},
            "records": list(self.records),
            "faults": list(self.faults),
        }
        if self.error is not None:
            out["error"] = self.error
        return out
