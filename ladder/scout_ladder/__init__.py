"""Scout Arena's ladder: bots play SCOUT day and night and are rated with TrueSkill.

This package's storage layer is :class:`~scout_ladder.repository.Repository` (SQLAlchemy, on
PostgreSQL or SQLite, schema by Alembic). Its names are re-exported here; the service, the
matchmaker and the CLI live in their own modules and are not imported here, so that reading the
database needs neither gRPC nor the referee. Of ``scout_arena`` it needs only ``ratings``, the
one definition of the conservative rating the leaderboard sorts by.

The names are imported when first used: ``scout_ladder.cli`` (whose ``--help`` should answer at
once) then does not pay for SQLAlchemy before it touches the database.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("scout_ladder.repository"), name)
    globals()[name] = value
    return value


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
