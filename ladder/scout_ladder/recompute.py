"""Checking the stored ratings against a replay of the match history.

The ladder rates each match as it finishes, in finish order, and commits the result and the
new ratings together; replaying every finished rated match in that order from the TrueSkill
default must give the stored ratings exactly (bit for bit: same arithmetic, same order). The
matches and the ratings are read in one snapshot (`Repository.rating_snapshot`), so a live
ladder finishing matches meanwhile never shows a difference that is not there.
"""

from __future__ import annotations

from dataclasses import dataclass

from scout_arena.ratings import Rating, replay_ratings

from .repository import RatingInfo, RatingSnapshot


@dataclass(frozen=True, slots=True)
class Difference:
    """A bot whose stored rating is not the replayed one (either side may be missing)."""

    bot: str
    stored: RatingInfo | None
    recomputed: Rating | None
    recomputed_games: int

    @property
    def delta_mu(self) -> float | None:
        if self.stored is None or self.recomputed is None:
            return None
        return self.stored.mu - self.recomputed.mu

    @property
    def delta_sigma(self) -> float | None:
        if self.stored is None or self.recomputed is None:
            return None
        return self.stored.sigma - self.recomputed.sigma


@dataclass(frozen=True, slots=True)
class RecomputeReport:
    matches: int
    """Rated matches replayed."""
    bots: int
    """Bots with a recomputed rating."""
    differences: tuple[Difference, ...]


def check(snapshot: RatingSnapshot) -> RecomputeReport:
    """Replays the snapshot's matches and compares with its stored ratings."""
    ratings, games = replay_ratings((m.bots, m.ranks) for m in snapshot.matches)
    differences = []
    for name in sorted(set(snapshot.ratings) | set(ratings)):
        have = snapshot.ratings.get(name)
        want = ratings.get(name)
        if have is None or want is None or have.mu != want.mu or have.sigma != want.sigma \
                or have.games != games.get(name, 0):
            differences.append(Difference(name, have, want, games.get(name, 0)))
    return RecomputeReport(len(snapshot.matches), len(ratings), tuple(differences))
