"""The ratings the ladder rates with, kept in memory beside the stored ones.

Results are rated and committed one at a time under `lock`, in the order the matches finish;
`recompute` replays that same order, so the stored ratings can be checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from scout_arena.ratings import Rating, make_env, rate_table

from .repository import RatingInfo

RatingUpdates = dict[str, tuple[float, float]]
"""Bot name -> (mu, sigma) after a match, as ``Repository.finish_match`` stores them."""


class RatingsCache:
    """Each bot's rating now; changed only by `apply`, after the repository stored it."""

    def __init__(self) -> None:
        self.env = make_env()
        self.ratings: dict[str, Rating] = {}
        self.lock = asyncio.Lock()
        """Held from rating a match until its result is stored and applied."""

    def load(self, stored: Mapping[str, RatingInfo]) -> None:
        self.ratings = {name: Rating(r.mu, r.sigma) for name, r in stored.items()}

    def get(self, name: str) -> Rating:
        """The bot's rating (a new bot's default when it has none yet)."""
        return self.ratings.get(name, Rating())

    def rate(self, players: Sequence[str], ranks: Sequence[int]) -> RatingUpdates:
        """The ratings the players of a table have after finishing in ``ranks``."""
        after = rate_table(self.env, [self.get(n) for n in players], ranks)
        return {n: (r.mu, r.sigma) for n, r in zip(players, after, strict=True)}

    def apply(self, updates: RatingUpdates) -> None:
        for name, (mu, sigma) in updates.items():
            self.ratings[name] = Rating(mu, sigma)
