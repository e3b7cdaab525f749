"""TrueSkill for SCOUT tables: the one rating environment of tournaments, the ladder and the web
pages, through one explicit environment object (no global setup).

Every match is rated as a free-for-all of one-player teams; equal ranks are draws and forfeited
seats already rank last in the referee's result. Live rating, `recompute` and every standings
table go through `rate_table` in the same order, so they agree to the last bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import trueskill

MU = 25.0
SIGMA = MU / 3
BETA = MU / 6
TAU = MU / 300
DRAW_PROBABILITY = 0.05
#: How many standard deviations below the mean the conservative (leaderboard) rating sits.
CONSERVATIVE_SIGMAS = 3


def make_env() -> trueskill.TrueSkill:
    return trueskill.TrueSkill(mu=MU, sigma=SIGMA, beta=BETA, tau=TAU,
                               draw_probability=DRAW_PROBABILITY, backend=None)


def conservative(mu: float, sigma: float) -> float:
    """The rating a leaderboard sorts by: a skill the bot very probably has at least."""
    return mu - CONSERVATIVE_SIGMAS * sigma


@dataclass(frozen=True, slots=True)
class Rating:
    mu: float = MU
    sigma: float = SIGMA

    @property
    def conservative(self) -> float:
        return conservative(self.mu, self.sigma)


def rate_table(env: trueskill.TrueSkill, before: Sequence[Rating], ranks: Sequence[int]
               ) -> list[Rating]:
    """New ratings of the seats of one match, given its ranks (1 best, shared on ties)."""
    groups = [(env.create_rating(r.mu, r.sigma),) for r in before]
    rated = env.rate(groups, ranks=[r - 1 for r in ranks])
    return [Rating(group[0].mu, group[0].sigma) for group in rated]


class RatingBook:
    """Ratings and game counts of many bots, updated match by match in the order given."""

    def __init__(self, start: Mapping[str, Rating] | None = None) -> None:
        self.env = make_env()
        self.ratings: dict[str, Rating] = dict(start or {})
        self.games: dict[str, int] = {}

    def get(self, bot: str) -> Rating:
        return self.ratings.get(bot, Rating())

    def rate(self, bots: Sequence[str], ranks: Sequence[int]) -> list[Rating]:
        """Rate one match (bots by seat, ranks 1 best) and return each seat's new rating."""
        after = rate_table(self.env, [self.get(b) for b in bots], ranks)
        for bot, rating in zip(bots, after, strict=True):
            self.ratings[bot] = rating
            self.games[bot] = self.games.get(bot, 0) + 1
        return after


def replay_ratings(matches: Iterable[tuple[Sequence[str], Sequence[int]]],
                   start: Mapping[str, Rating] | None = None
                   ) -> tuple[dict[str, Rating], dict[str, int]]:
    """Ratings and game counts after rating ``(bots by seat, ranks)`` matches in order."""
    book = RatingBook(start)
    for bots, ranks in matches:
        book.rate(bots, ranks)
    return book.ratings, book.games
