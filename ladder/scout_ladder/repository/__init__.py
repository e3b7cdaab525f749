"""The ladder's storage: every read and write of bots, matches, ratings and challenges.

Why it looks the way it does:

* **Synchronous.** The service calls it through ``asyncio.to_thread``: SQLAlchemy's sync API is
  the mature one, and a thread per call keeps the event loop free while PostgreSQL or SQLite
  works. One engine (and so one connection pool) serves every thread.
* **Frozen dataclasses out, never ORM objects** (:mod:`.results`). A caller in another thread
  cannot lazily load through a closed session, and cannot change a row by assigning to an
  attribute.
* **One transaction per public call.** In particular :meth:`Repository.finish_match` writes the
  seats' results, the match record and every rating update (with its history row) together, so
  a crash can never leave a finished match without its rating change or the reverse.
* **PostgreSQL in production, SQLite for a single box and for tests** (:mod:`.database`). Both
  run the same Alembic migrations.
* **One ladder per database** (:mod:`.lease`). ``ladder serve`` takes a lease (an advisory lock
  on PostgreSQL, ``flock`` on SQLite) that the operating system or the server drops with the
  process, so a second ladder refuses to start and a killed one never blocks its restart.
* **Idempotent endings** (:mod:`.matches`). Finishing or voiding a match again is a no-op, so a
  caller that lost the answer to a commit retries safely.
* **Tokens are never stored** (:mod:`.bots`). Only their SHA-256 is, so a copy of the database
  lets nobody play as a bot.

The queries live in one module per concern, each a :class:`~.database.Database` subclass;
:class:`Repository` joins them, so that callers keep one object and one import.
"""

from __future__ import annotations

from .bots import BotStore, hash_token
from .challenges import ChallengeStore
from .common import echo
from .database import MIGRATIONS_DIR, alembic_config, is_transient
from .errors import (
    BotOwnerError,
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    LeaseHeldError,
    LeaseLostError,
    MatchStateError,
    NoLadderDatabaseError,
    StorageError,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
)
from .lease import Lease
from .match_history import MatchHistory
from .matches import MatchStore
from .ratings import RECENT_FORM_LENGTH, RatingStore
from .results import (
    BotInfo,
    BotProfile,
    BotResult,
    BotVersionInfo,
    ChallengeInfo,
    FinishedMatch,
    LeaderboardRow,
    MatchSummary,
    RatingHistoryEntry,
    RatingInfo,
    RatingPoint,
    RatingSnapshot,
    SeatResult,
    SeatSummary,
    TableSizeRecord,
)


class Repository(BotStore, MatchStore, MatchHistory, RatingStore, ChallengeStore):
    """The ladder database behind one SQLAlchemy engine; safe to share between threads.

    ``url`` is a SQLAlchemy URL: ``sqlite:///path/ladder.db`` or
    ``postgresql+psycopg://user:password@host/db``. ``clock`` gives the current time (tests
    pass a fake one to control the finish order). Call :meth:`migrate` once before use.
    """


__all__ = [
    "MIGRATIONS_DIR",
    "RECENT_FORM_LENGTH",
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
    "Lease",
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
    "echo",
    "hash_token",
    "is_transient",
]
