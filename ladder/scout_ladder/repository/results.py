"""What the repository hands out: frozen dataclasses, never ORM objects.

A caller in another thread cannot lazily load through a closed session, and cannot change a row
by assigning to an attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from scout_arena.ratings import conservative


@dataclass(frozen=True, slots=True)
class BotInfo:
    """A registered bot as the ladder sees it now."""

    name: str
    owner: str
    version: int
    retired: bool
    created_at: datetime
    probation_reason: str | None
    probation_since: datetime | None
    kind: str = "remote"
    """A :class:`BotKind` value."""
    paused_reason: str | None = None
    """Why a hosted bot is paused (not scheduled until a new version passes); None: it is not."""
    suspended_reason: str | None = None
    """Why its owner account is suspended (its bots are not scheduled); None: it is not."""

    @property
    def on_probation(self) -> bool:
        return self.probation_reason is not None

    @property
    def unschedulable_reason(self) -> str | None:
        """Why the matchmaker must not seat it, whatever its connection, or None. Probation is
        not here: the ladder lifts it when the bot reconnects."""
        if self.retired:
            return "retired"
        if self.suspended_reason is not None:
            return f"its owner is suspended: {self.suspended_reason}"
        if self.paused_reason is not None:
            return f"paused: {self.paused_reason}"
        if self.version == 0:
            return "no version of it has passed validation yet"
        return None


class BotKind(StrEnum):
    """Who runs a bot: its owner (``remote``, connecting with its token) or the ladder
    (``hosted``, its uploaded versions in the sandbox)."""

    REMOTE = "remote"
    HOSTED = "hosted"


class VersionStatus(StrEnum):
    """A version's state: a hosted upload is ``validating`` until the validator decides; a
    remote registration is ``active`` at once. Active versions become ``superseded`` when a
    newer one becomes active."""

    VALIDATING = "validating"
    ACTIVE = "active"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class BotVersionInfo:
    """A version of a bot. The upload fields are None for a remote bot's versions."""

    version: int
    registered_at: datetime
    status: str = VersionStatus.ACTIVE
    """A :class:`VersionStatus` value."""
    reason: str | None = None
    """Why it was rejected."""
    validation_output: str | None = None
    """The (tail of the) output of its validation runs."""
    archive_sha256: str | None = None
    archive_size: int | None = None
    runtime: str | None = None
    command: tuple[str, ...] = ()
    decided_at: datetime | None = None
    bot: str = ""


@dataclass(frozen=True, slots=True)
class OwnerInfo:
    """An owner account; its token is never kept, only its hash."""

    name: str
    suspended_reason: str | None
    created_at: datetime

    @property
    def suspended(self) -> bool:
        return self.suspended_reason is not None


@dataclass(frozen=True, slots=True)
class OwnerProfile:
    owner: OwnerInfo
    bots: tuple[BotInfo, ...]
    """Its bots by name, retired ones included."""


@dataclass(frozen=True, slots=True)
class HostedRunInfo:
    """What one hosted run of a bot left (its owner's eyes only)."""

    bot: str
    match_id: str
    version: int
    outcome_reason: str
    output_tail: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SeatResult:
    """How one seat's match went, as the referee reported it; input of ``finish_match``.

    ``bot`` must name the bot that ``start_match`` put in the seat: it catches a result list in
    the wrong order before it is stored. ``rank`` is the competition rank (1 is best, equal
    scores share a rank, forfeited seats rank last).
    """

    seat: int
    bot: str
    score: int
    rank: int
    forfeited: bool = False
    timeouts: int = 0
    illegal_actions: int = 0


@dataclass(frozen=True, slots=True)
class SeatSummary:
    """A seat of a stored match. The result fields are None until the match is finished."""

    seat: int
    bot: str
    bot_version: int
    score: int | None
    rank: int | None
    forfeited: bool
    timeouts: int
    illegal_actions: int


@dataclass(frozen=True, slots=True)
class MatchSummary:
    """A stored match without its record (records are large; ``get_record`` fetches one)."""

    match_id: str
    status: str
    table_size: int
    seed: int
    rated: bool
    challenge_id: int | None
    created_at: datetime
    finished_at: datetime | None
    void_reason: str | None
    seats: tuple[SeatSummary, ...]


@dataclass(frozen=True, slots=True)
class FinishedMatch:
    """A finished match as a rating recompute needs it; every seat has its rank."""

    match_id: str
    table_size: int
    rated: bool
    challenge_id: int | None
    finished_at: datetime
    seats: tuple[SeatSummary, ...]

    @property
    def bots(self) -> tuple[str, ...]:
        """The bots by seat."""
        return tuple(seat.bot for seat in self.seats)

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks by seat."""
        return tuple(seat.rank for seat in self.seats if seat.rank is not None)


@dataclass(frozen=True, slots=True)
class RatingInfo:
    bot: str
    mu: float
    sigma: float
    games: int
    updated_at: datetime

    @property
    def conservative(self) -> float:
        """mu - 3 sigma: the skill the bot has almost surely, which the leaderboard sorts by."""
        return conservative(self.mu, self.sigma)


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    rank: int
    bot: str
    owner: str
    mu: float
    sigma: float
    conservative: float
    games: int
    recent_ranks: tuple[int, ...]
    """The recent form: ranks in the bot's last rated matches, newest first (at most 5)."""
    on_probation: bool
    recent_table_sizes: tuple[int, ...] = ()
    """The table size of each match of ``recent_ranks``: a 2nd place of 2 is a last place."""


@dataclass(frozen=True, slots=True)
class RatingPoint:
    """The rating a bot had right after a rated match."""

    match_id: str
    mu: float
    sigma: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RatingHistoryEntry:
    """Input of ``replace_ratings``: a bot's rating right after a match, from a recompute."""

    bot: str
    match_id: str
    mu: float
    sigma: float


@dataclass(frozen=True, slots=True)
class TableSizeRecord:
    """A bot's finished matches at one table size. A win is a shared or outright rank 1."""

    table_size: int
    matches: int
    wins: int
    mean_rank: float
    mean_score: float


@dataclass(frozen=True, slots=True)
class BotResult:
    """One finished match from one bot's point of view."""

    match_id: str
    finished_at: datetime
    table_size: int
    rated: bool
    seat: int
    bot_version: int
    score: int
    rank: int
    forfeited: bool
    timeouts: int
    illegal_actions: int


@dataclass(frozen=True, slots=True)
class BotProfile:
    bot: BotInfo
    rating: RatingInfo | None
    leaderboard_rank: int | None
    versions: tuple[BotVersionInfo, ...]
    history: tuple[RatingPoint, ...]
    """The rating after each rated match, oldest first."""
    by_table_size: tuple[TableSizeRecord, ...]
    matches_finished: int
    timeouts: int
    forfeits: int
    illegal_actions: int
    recent_matches: tuple[MatchSummary, ...]
    """The bot's last finished matches with every seat, newest first."""


@dataclass(frozen=True, slots=True)
class ChallengeInfo:
    id: int
    owner: str
    bot: str
    opponents: tuple[str, ...]
    games_requested: int
    games_played: int
    games_in_flight: int
    """Matches of this challenge started and not yet finished or voided: the matchmaker
    schedules at most games_requested - games_played - games_in_flight more."""
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RatingSnapshot:
    """The finished rated matches (in the order they finished) and the stored ratings at one
    moment: the input of a recompute check."""

    matches: tuple[FinishedMatch, ...]
    ratings: Mapping[str, RatingInfo]
