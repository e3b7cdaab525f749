"""What finished matches say of each bot, beyond its rating: scores, ranks, win shares, faults,
and the head-to-head shares. One definition for the tournament's standings and the web pages
that show a tournament still running: a win shared by several first places counts a share to
each; a head-to-head share counts ties as half."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from .model import MatchOutcome


@dataclass
class SeatTally:
    """One bot's seats over finished matches."""

    scores: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    wins: float = 0.0
    timeouts: int = 0
    illegal_actions: int = 0
    forfeits: int = 0

    def add(self, outcome: MatchOutcome, seat: int) -> None:
        self.scores.append(outcome.totals[seat])
        self.ranks.append(outcome.ranks[seat])
        if outcome.ranks[seat] == 1:
            self.wins += 1 / len(outcome.winners)
        self.timeouts += outcome.seats[seat].timeouts
        self.illegal_actions += outcome.seats[seat].illegal_actions
        self.forfeits += seat in outcome.forfeits

    def mean_score_ci(self) -> tuple[float, float]:
        """The mean score and the half-width of its 95% interval (inf below two matches)."""
        if not self.scores:
            return (0.0, 0.0)
        mean = statistics.fmean(self.scores)
        if len(self.scores) < 2:
            return (mean, math.inf)
        return (mean, 1.96 * statistics.stdev(self.scores) / math.sqrt(len(self.scores)))


def head_to_head(outcomes: Sequence[MatchOutcome], names: Sequence[str]
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
                    1.0 if mine < theirs else 0.5 if mine == theirs else 0.0)
    return {a: {b: (ahead[(a, b)] / met[(a, b)]) if met.get((a, b)) else None
                for b in names if b != a} for a in names}
