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
  lets nobody play as a bot. Owner tokens and invite codes likewise (:mod:`.owners`).
* **Files beside the database** (:mod:`.files`). Hosted bots' uploads and data folders live in
  a storage folder; the database says which versions exist (:mod:`.hosted`).

The queries live in one module per concern, each a :class:`~.database.Database` subclass;
:class:`Repository` joins them, so that callers keep one object and one import.
"""

from __future__ import annotations

from scout_arena.text import echo

from .bots import BotStore, hash_token, new_token
from .challenges import ChallengeStore
from .database import MIGRATIONS_DIR, alembic_config, is_transient
from .errors import (
    BotKindError,
    BotOwnerError,
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    InviteError,
    LeaseHeldError,
    LeaseLostError,
    LimitError,
    MatchStateError,
    NoLadderDatabaseError,
    NotYourBotError,
    OwnerExistsError,
    OwnerSuspendedError,
    StorageError,
    TooManyBotsError,
    TooManySubmissionsError,
    UnknownBotError,
    UnknownChallengeError,
    UnknownMatchError,
    UnknownOwnerError,
    UnknownVersionError,
    UploadTooLargeError,
    VersionStateError,
)
from .files import OUTPUT_LIMIT_BYTES, FileStore, OwnerLimits, default_storage, tail_text
from .hosted import HostedStore
from .lease import Lease
from .match_history import MatchHistory, MatchPosition
from .matches import MatchStore
from .owners import OwnerStore
from .ratings import RECENT_FORM_LENGTH, RatingStore
from .results import (
    BotInfo,
    BotKind,
    BotProfile,
    BotResult,
    BotVersionInfo,
    ChallengeInfo,
    FinishedMatch,
    HostedRunInfo,
    LeaderboardRow,
    MatchSummary,
    OwnerInfo,
    OwnerProfile,
    RatingHistoryEntry,
    RatingInfo,
    RatingPoint,
    RatingSnapshot,
    SeatResult,
    SeatSummary,
    TableSizeRecord,
    VersionStatus,
)


class Repository(BotStore, MatchStore, MatchHistory, RatingStore, ChallengeStore, OwnerStore,
                 HostedStore):
    """The ladder database behind one SQLAlchemy engine; safe to share between threads.

    ``url`` is a SQLAlchemy URL: ``sqlite:///path/ladder.db`` or
    ``postgresql+psycopg://user:password@host/db``. ``clock`` gives the current time (tests
    pass a fake one to control the finish order). Call :meth:`migrate` once before use.
    """


__all__ = [
    "MIGRATIONS_DIR",
    "OUTPUT_LIMIT_BYTES",
    "RECENT_FORM_LENGTH",
    "BotInfo",
    "BotKind",
    "BotKindError",
    "BotOwnerError",
    "BotProfile",
    "BotResult",
    "BotRetiredError",
    "BotVersionInfo",
    "ChallengeInfo",
    "DuplicateMatchError",
    "FileStore",
    "FinishedMatch",
    "HostedRunInfo",
    "InvalidInputError",
    "InviteError",
    "LeaderboardRow",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "LimitError",
    "MatchStateError",
    "MatchPosition",
    "MatchSummary",
    "NoLadderDatabaseError",
    "NotYourBotError",
    "OwnerExistsError",
    "OwnerInfo",
    "OwnerLimits",
    "OwnerProfile",
    "OwnerSuspendedError",
    "RatingHistoryEntry",
    "RatingInfo",
    "RatingPoint",
    "RatingSnapshot",
    "Repository",
    "SeatResult",
    "SeatSummary",
    "StorageError",
    "TableSizeRecord",
    "TooManyBotsError",
    "TooManySubmissionsError",
    "UnknownBotError",
    "UnknownChallengeError",
    "UnknownMatchError",
    "UnknownOwnerError",
    "UnknownVersionError",
    "UploadTooLargeError",
    "VersionStateError",
    "VersionStatus",
    "alembic_config",
    "default_storage",
    "echo",
    "hash_token",
    "new_token",
    "is_transient",
    "tail_text",
]
