"""Standings from finished matches in schedule order: TrueSkill through the one rating module,
score intervals, win shares and the head-to-head table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..ratings import RatingBook, conservative
from ..record import MatchOutcome


@dataclass
class BotStats:
    name: str
    matches: int = 0
    scores: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    wins: float = 0.0
    timeouts: int = 0
    illegal_actions: int = 0
    forfeits: int = 0
    mu: float = 25.0
    sigma: float = 25.0 / 3

    @property
    def conservative(self) -> float:
        return conservative(self.mu, self.sigma)

    def mean_score_ci(self) -> tuple[float, float]:
        if not self.scores:
            return (0.0, 0.0)
        mean = statistics.fmean(self.scores)
        if len(self.scores) < 2:
            return (mean, math.inf)
        return (mean, 1.96 * statistics.stdev(self.scores) / math.sqrt(len(self.scores)))


def compute_standings(outcomes: Sequence[MatchOutcome], names: Sequence[str]
                      ) -> tuple[dict[str, BotStats], dict[str, dict[str, float]]]:
    """Standings and head-to-head shares from finished matches, taken in schedule order."""
    book = RatingBook()
    stats = {name: BotStats(name) for name in names}
    wins_vs: dict[str, dict[str, float]] = {a: {b: 0.0 for b in names} for a in names}
    games_vs: dict[str, dict[str, int]] = {a: {b: 0 for b in names} for a in names}
    for outcome in outcomes:
        seats, ranks = outcome.players, outcome.ranks
        firsts = len(outcome.winners)
        for seat, name in enumerate(seats):
            s = stats[name]
            s.matches += 1
            s.scores.append(outcome.totals[seat])
            s.ranks.append(ranks[seat])
            if ranks[seat] == 1:
                s.wins += 1 / firsts
            s.timeouts += outcome.seats[seat].timeouts
            s.illegal_actions += outcome.seats[seat].illegal_actions
            s.forfeits += seat in outcome.forfeits
            for other, other_name in enumerate(seats):
                if other != seat:
                    games_vs[name][other_name] += 1
                    if ranks[seat] < ranks[other]:
                        wins_vs[name][other_name] += 1
                    elif ranks[seat] == ranks[other]:
                        wins_vs[name][other_name] += 0.5
        book.rate(seats, ranks)
    for name in names:
        rating = book.get(name)
        stats[name].mu, stats[name].sigma = rating.mu, rating.sigma
    share = {a: {b: (wins_vs[a][b] / games_vs[a][b]) if games_vs[a][b] else math.nan
                 for b in names} for a in names}
    return stats, share
