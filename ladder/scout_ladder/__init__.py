"""Scout Arena's ladder: bots play SCOUT day and night and are rated with TrueSkill.

This package's storage layer is :class:`~scout_ladder.repository.Repository` (SQLAlchemy, on
PostgreSQL or SQLite, schema by Alembic). Its names are re-exported here; the service, the
matchmaker and the CLI live in their own modules and are not imported here, so that reading the
database needs neither gRPC nor the referee. Of ``scout_arena`` it needs only ``ratings``, the
one definition of the conservative rating the leaderboard sorts by.
"""

from scout_ladder.repository import (
    BotInfo,
    BotOwnerError,
    BotProfile,
    BotResult,
    BotRetiredError,
    BotVersionInfo,
    ChallengeInfo,
    DuplicateMatchError,
    FinishedMatch,
    InvalidInputError,
    LeaderboardRow,
    LeaseHeldError,
    LeaseLostError,
    MatchStateError,
    MatchSummary,
    NoLadderDatabaseError,
    RatingHistoryEntry,
    RatingInfo,
    RatingPoint,
    RatingSnapshot,
    Repository,
    SeatResult,
    SeatSummary,
    StorageError,
    TableSizeRecord,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
    alembic_config,
    hash_token,
)

__all__ = [
    "BotInfo",
    "BotOwnerError",
    "BotProfile",
    "BotResult",
    "BotRetiredError",
    "BotVersionInfo",
    "ChallengeInfo",
    "DuplicateMatchError",
    "FinishedMatch",
    "InvalidInputError",
    "LeaderboardRow",
    "LeaseHeldError",
    "LeaseLostError",
    "MatchStateError",
    "MatchSummary",
    "NoLadderDatabaseError",
    "RatingHistoryEntry",
    "RatingInfo",
    "RatingPoint",
    "RatingSnapshot",
    "Repository",
    "SeatResult",
    "SeatSummary",
    "StorageError",
    "TableSizeRecord",
    "UnknownBotError",
    "UnknownChallengeError",
    "UnknownMatchError",
    "alembic_config",
    "hash_token",
]
