"""A tournament's numbers as its terminal shows them (win share, mean score with its 95%
interval, mean rank, head-to-head shares), for a tournament still running: once it ends, the
pages show summary.json's own numbers, which these equal (tests/test_web.py checks it).

The same definitions as ``scout_arena.tournament.standings``: a win shared by several first
places counts a share to each; a head-to-head share counts ties as half. Kept here because the
web pages do not import the tournament runner (the layers contract in pyproject.toml).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..record import JSON, MatchOutcome


@dataclass
class _Tally:
    scores: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    wins: float = 0.0
    timeouts: int = 0
    illegal_actions: int = 0
    forfeits: int = 0

    def to_json(self) -> JSON:
        n = len(self.scores)
        half = (1.96 * statistics.stdev(self.scores) / math.sqrt(n)) if n >= 2 else None
        return {
            "win_rate": round(self.wins / n, 4) if n else None,
            "mean_score": round(statistics.fmean(self.scores), 3) if n else None,
            "mean_score_ci95": None if half is None else round(half, 3),
            "mean_rank": round(statistics.fmean(self.ranks), 3) if n else None,
            "timeouts": self.timeouts,
            "illegal_actions": self.illegal_actions,
            "forfeits": self.forfeits,
        }


def bot_stats(outcomes: Sequence[MatchOutcome]) -> dict[str, JSON]:
    """Each bot's line of the terminal's standings, beyond its rating."""
    tallies: dict[str, _Tally] = {}
    for outcome in outcomes:
        firsts = len(outcome.winners)
        for seat, name in enumerate(outcome.players):
            t = tallies.setdefault(name, _Tally())
            t.scores.append(outcome.totals[seat])
            t.ranks.append(outcome.ranks[seat])
            if outcome.ranks[seat] == 1:
                t.wins += 1 / firsts
            t.timeouts += outcome.seats[seat].timeouts
            t.illegal_actions += outcome.seats[seat].illegal_actions
            t.forfeits += seat in outcome.forfeits
    return {name: t.to_json() for name, t in tallies.items()}


def head_to_head(
    outcomes: Sequence[MatchOutcome], names: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """Row bot -> column bot -> share of their encounters the row bot finished ahead (ties
    count half; None: they never met)."""
    ahead: dict[tuple[str, str], float] = {}
    met: dict[tuple[str, str], int] = {}
    for outcome in outcomes:
        for seat, name in enumerate(outcome.players):
            for other, other_name in enumerate(outcome.players):
                if other == seat:
                    continue
                key = (name, other_name)
                met[key] = met.get(key, 0) + 1
                mine, theirs = outcome.ranks[seat], outcome.ranks[other]
                ahead[key] = ahead.get(key, 0.0) + (
                    1.0 if mine < theirs else 0.5 if mine == theirs else 0.0
                )
    return {
        a: {b: (ahead[(a, b)] / met[(a, b)]) if met.get((a, b)) else None for b in names if b != a}
        for a in names
    }
