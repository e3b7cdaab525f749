"""Standings from finished matches in schedule order: TrueSkill through the one rating module,
the tallies and head-to-head shares of `record.tally`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..ratings import RatingBook, conservative
from ..record import MatchOutcome
from ..record.tally import SeatTally, head_to_head


@dataclass
class BotStats(SeatTally):
    name: str = ""
    mu: float = 25.0
    sigma: float = 25.0 / 3

    @property
    def matches(self) -> int:
        return len(self.scores)

    @property
    def conservative(self) -> float:
        return conservative(self.mu, self.sigma)


def compute_standings(outcomes: Sequence[MatchOutcome], names: Sequence[str]
                      ) -> tuple[dict[str, BotStats], dict[str, dict[str, float]]]:
    """Standings and head-to-head shares (nan: never met) from finished matches, taken in
    schedule order."""
    book = RatingBook()
    stats = {name: BotStats(name=name) for name in names}
    for outcome in outcomes:
        for seat, name in enumerate(outcome.players):
            stats[name].add(outcome, seat)
        book.rate(outcome.players, outcome.ranks)
    for name in names:
        rating = book.get(name)
        stats[name].mu, stats[name].sigma = rating.mu, rating.sigma
    shares = head_to_head(outcomes, names)
    share = {a: {b: math.nan if (v := shares[a].get(b)) is None else v for b in names}
             for a in names}
    return stats, share
