"""TrueSkill for SCOUT tables, through one explicit environment object (no global setup).

Every match is rated as a free-for-all of one-player teams; equal ranks are draws and forfeited
seats already rank last in the referee's result. Live rating and `recompute` go through the
same function in the same order, so they agree to the last bit.
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


def make_env() -> trueskill.TrueSkill:
    return trueskill.TrueSkill(mu=MU, sigma=SIGMA, beta=BETA, tau=TAU,
                               draw_probability=DRAW_PROBABILITY, backend=None)


@dataclass(frozen=True, slots=True)
class Rating:
    mu: float = MU
    sigma: float = SIGMA

    @property
    def conservative(self) -> float:
        return self.mu - 3 * self.sigma


def rate_table(env: trueskill.TrueSkill, before: Sequence[Rating], ranks: Sequence[int]
               ) -> list[Rating]:
    """New ratings of the seats of one match, given its ranks (1 best, shared on ties)."""
    groups = [(env.create_rating(r.mu, r.sigma),) for r in before]
    rated = env.rate(groups, ranks=[r - 1 for r in ranks])
    return [Rating(group[0].mu, group[0].sigma) for group in rated]


def replay_ratings(matches: Iterable[tuple[Sequence[str], Sequence[int]]],
                   start: Mapping[str, Rating] | None = None
                   ) -> tuple[dict[str, Rating], dict[str, int]]:
    """Ratings and game counts after rating ``(bots by seat, ranks)`` matches in order."""
    env = make_env()
    ratings: dict[str, Rating] = dict(start or {})
    games: dict[str, int] = {}
    for bots, ranks in matches:
        before = [ratings.get(b, Rating()) for b in bots]
        for bot, after in zip(bots, rate_table(env, before, ranks), strict=True):
            ratings[bot] = after
            games[bot] = games.get(bot, 0) + 1
    return ratings, games
