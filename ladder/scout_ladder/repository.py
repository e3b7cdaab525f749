"""The ladder's storage: every read and write of bots, matches, ratings and challenges.

Why it looks the way it does:

* **Synchronous.** The service calls it through ``asyncio.to_thread``: SQLAlchemy's sync API is
  the mature one, and a thread per call keeps the event loop free while PostgreSQL or SQLite
  works. One engine (and so one connection pool) serves every thread.
* **Frozen dataclasses out, never ORM objects.** A caller in another thread cannot lazily load
  through a closed session, and cannot change a row by assigning to an attribute.
* **One transaction per public call.** In particular :meth:`Repository.finish_match` writes the
  seats' results, the match record and every rating update (with its history row) together, so
  a crash can never leave a finished match without its rating change or the reverse.
* **PostgreSQL in production, SQLite for a single box and for tests.** Both run the same
  Alembic migrations. SQLite gets ``foreign_keys=ON`` (off by default there), WAL (readers do
  not block the writer) and ``BEGIN IMMEDIATE`` for writes (two deferred transactions that both
  upgrade to writing would otherwise fail at once instead of waiting for the busy timeout).
* **Tokens are never stored.** Only their SHA-256 is, so a copy of the database lets nobody
  play as a bot.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    Connection,
    Engine,
    and_,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from scout_ladder.models import (
    NAME_LENGTH,
    OWNER_LENGTH,
    SEED_LIMIT,
    Bot,
    BotVersion,
    Challenge,
    Match,
    MatchSeat,
    Rating,
    RatingHistory,
)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

RECENT_FORM_LENGTH = 5
"""How many of a bot's latest rated ranks the leaderboard shows."""

_BOT_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{NAME_LENGTH - 1}}}")
_FETCH_BATCH = 500
_SQLITE_BUSY_TIMEOUT_S = 30.0
_WRITE_OPTION = "scout_ladder_write"

# Alembic keeps the running migration's context in module globals (alembic.context, alembic.op),
# so two migrations in one process must not overlap, whatever their databases.
_ALEMBIC_LOCK = threading.Lock()


# --- errors ---------------------------------------------------------------------------------


class StorageError(Exception):
    """Base class of the errors the repository raises on purpose."""


class _NotFound(StorageError, KeyError):
    """A lookup by name or id found nothing. A KeyError, so that callers mapping KeyError to
    "not found" need no special case; printed plainly, not with KeyError's quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class UnknownBotError(_NotFound):
    """No bot has this name."""


class UnknownMatchError(_NotFound):
    """No match has this id."""


class UnknownChallengeError(_NotFound):
    """No challenge has this id."""


class BotRetiredError(StorageError):
    """The bot is retired, and a retired bot takes no seat and no challenge."""


class BotOwnerError(StorageError):
    """The name is registered to another owner: a new version keeps the owner."""


class DuplicateMatchError(StorageError):
    """A match with this id was already started."""


class MatchStateError(StorageError):
    """The match is not in flight (already finished or voided), so it cannot end again."""


class InvalidInputError(StorageError, ValueError):
    """The arguments contradict the stored data or the game (wrong seats, bad rank, ...)."""


# --- what the repository hands out ----------------------------------------------------------


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

    @property
    def on_probation(self) -> bool:
        return self.probation_reason is not None


@dataclass(frozen=True, slots=True)
class BotVersionInfo:
    version: int
    registered_at: datetime


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
    """A finished match as a rating recompute needs it; ``bots`` and ``ranks`` are by seat."""

    match_id: str
    table_size: int
    rated: bool
    challenge_id: int | None
    finished_at: datetime
    bots: tuple[str, ...]
    ranks: tuple[int, ...]
    seats: tuple[SeatSummary, ...]


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
        return self.mu - 3 * self.sigma


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


# --- helpers --------------------------------------------------------------------------------


def hash_token(token: str) -> str:
    """The stored form of a bot token: SHA-256, hex. Tokens are 256 random bits, so a plain
    hash (no salt, no stretching) is enough and lets authentication be one indexed lookup."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration for the ladder's migrations, built in code so that no
    alembic.ini is needed. With a URL it also works for ``alembic.command`` calls by hand
    (``command.revision(alembic_config(url), autogenerate=True, message=...)``)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        rendered = url.render_as_string(hide_password=False) if isinstance(url, URL) else url
        # ConfigParser interpolation would read a '%' in a password as a reference.
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _check_bot_name(name: str) -> None:
    if not isinstance(name, str) or not _BOT_NAME.fullmatch(name):
        raise InvalidInputError(
            f"a bot name is 1-{NAME_LENGTH} letters, digits, '_', '.' or '-', starting with a "
            f"letter or digit; got {name!r}"
        )


def _check_owner(owner: str) -> None:
    if not isinstance(owner, str) or not owner.strip() or len(owner) > OWNER_LENGTH:
        raise InvalidInputError(f"an owner is 1-{OWNER_LENGTH} characters; got {owner!r}")


def _check_rating(bot: str, mu: float, sigma: float) -> None:
    if not (math.isfinite(mu) and math.isfinite(sigma) and sigma > 0):
        raise InvalidInputError(f"rating of {bot} must be finite with sigma > 0: {mu}, {sigma}")


def _bot_info(bot: Bot) -> BotInfo:
    return BotInfo(
        name=bot.name,
        owner=bot.owner,
        version=bot.version,
        retired=bot.retired,
        created_at=bot.created_at,
        probation_reason=bot.probation_reason,
        probation_since=bot.probation_since,
    )


def _seat_summary(seat: MatchSeat, bot_name: str) -> SeatSummary:
    return SeatSummary(
        seat=seat.seat,
        bot=bot_name,
        bot_version=seat.bot_version,
        score=seat.score,
        rank=seat.rank,
        forfeited=seat.forfeited,
        timeouts=seat.timeouts,
        illegal_actions=seat.illegal_actions,
    )


def _bot_result(match: Match, seat: MatchSeat) -> BotResult:
    assert match.finished_at is not None and seat.score is not None and seat.rank is not None
    return BotResult(
        match_id=match.id,
        finished_at=match.finished_at,
        table_size=match.table_size,
        rated=match.rated,
        seat=seat.seat,
        bot_version=seat.bot_version,
        score=seat.score,
        rank=seat.rank,
        forfeited=seat.forfeited,
        timeouts=seat.timeouts,
        illegal_actions=seat.illegal_actions,
    )


def _finished_match(summary: MatchSummary) -> FinishedMatch:
    # A finished match has a rank in every seat (finish_match checks it).
    ranks = tuple(seat.rank for seat in summary.seats if seat.rank is not None)
    assert summary.finished_at is not None and len(ranks) == len(summary.seats)
    return FinishedMatch(
        match_id=summary.match_id,
        table_size=summary.table_size,
        rated=summary.rated,
        challenge_id=summary.challenge_id,
        finished_at=summary.finished_at,
        bots=tuple(seat.bot for seat in summary.seats),
        ranks=ranks,
        seats=summary.seats,
    )


def _bot_by_name(session: Session, name: str, *, lock: bool = False) -> Bot:
    query = select(Bot).where(Bot.name == name)
    if lock:
        query = query.with_for_update()
    bot = session.scalars(query).one_or_none()
    if bot is None:
        raise UnknownBotError(name)
    return bot


def _match_summaries(session: Session, matches: Sequence[Match]) -> list[MatchSummary]:
    seats: dict[str, list[SeatSummary]] = defaultdict(list)
    ids = [match.id for match in matches]
    for start in range(0, len(ids), _FETCH_BATCH):
        rows = session.execute(
            select(MatchSeat, Bot.name)
            .join(Bot, Bot.id == MatchSeat.bot_id)
            .where(MatchSeat.match_id.in_(ids[start : start + _FETCH_BATCH]))
            .order_by(MatchSeat.match_id, MatchSeat.seat)
        )
        for seat, bot_name in rows:
            seats[seat.match_id].append(_seat_summary(seat, bot_name))
    return [
        MatchSummary(
            match_id=match.id,
            status=match.status,
            table_size=match.table_size,
            seed=match.seed,
            rated=match.rated,
            challenge_id=match.challenge_id,
            created_at=match.created_at,
            finished_at=match.finished_at,
            void_reason=match.void_reason,
            seats=tuple(seats[match.id]),
        )
        for match in matches
    ]


# --- the repository -------------------------------------------------------------------------


class Repository:
    """The ladder database behind one SQLAlchemy engine; safe to share between threads.

    ``url`` is a SQLAlchemy URL: ``sqlite:///path/ladder.db`` or
    ``postgresql+psycopg://user:password@host/db``. ``clock`` gives the current time (tests
    pass a fake one to control the finish order). Call :meth:`migrate` once before use.
    """

    def __init__(
        self,
        url: str | URL,
        *,
        echo: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._url = make_url(url)
        self._clock = clock or _utc_now
        self._backend = self._url.get_backend_name()
        self._memory_lock: threading.RLock | None = None
        if self._backend == "sqlite":
            self._engine = self._sqlite_engine(echo)
        elif self._backend == "postgresql":
            self._engine = create_engine(self._url, echo=echo, pool_pre_ping=True)
        else:
            raise ValueError(f"the ladder stores to sqlite or postgresql, not {self._backend}")

    def _sqlite_engine(self, echo: bool) -> Engine:
        database = self._url.database
        in_memory = database in (None, "", ":memory:")
        connect_args = {"timeout": _SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
        if in_memory:
            # One connection for everybody, or each thread would see its own empty database;
            # the lock keeps the threads' transactions on it from interleaving.
            self._memory_lock = threading.RLock()
            engine = create_engine(
                self._url, echo=echo, connect_args=connect_args, poolclass=StaticPool
            )
        else:
            engine = create_engine(self._url, echo=echo, connect_args=connect_args)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy's "begin" hook below issue BEGIN, not the sqlite3 module, so that
            # writes can say IMMEDIATE and DDL runs inside the migration's transaction.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={int(_SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            write = connection.get_execution_options().get(_WRITE_OPTION, False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine

    def _now(self) -> datetime:
        """The clock's time in UTC, so that what a call returns equals what it stored."""
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the ladder's clock must give timezone-aware datetimes")
        return now.astimezone(UTC)

    # --- lifecycle ---

    @property
    def backend(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self._backend

    @property
    def url(self) -> str:
        """The database URL with the password hidden, for logs."""
        return self._url.render_as_string(hide_password=True)

    def close(self) -> None:
        """Closes the pooled connections."""
        self._engine.dispose()

    def __enter__(self) -> Repository:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def migrate(self) -> None:
        """Brings the schema to the newest revision (``alembic upgrade head``); a no-op when it
        is there already, so the service runs it at every start."""
        config = alembic_config()
        with _ALEMBIC_LOCK, self._locked(), self._engine.connect() as connection:
            connection.execution_options(**{_WRITE_OPTION: True})
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, "head")

    def _locked(self) -> AbstractContextManager[object]:
        return self._memory_lock if self._memory_lock is not None else nullcontext()

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Session]:
        """One session in one transaction, committed on success and rolled back on error.

        Reads on PostgreSQL run at REPEATABLE READ, so that a leaderboard or profile built from
        several queries sees one moment; read-only transactions never fail to serialize.
        """
        with self._locked(), self._engine.connect() as connection:
            if write:
                connection.execution_options(**{_WRITE_OPTION: True})
            elif self._backend == "postgresql":
                connection.execution_options(isolation_level="REPEATABLE READ")
            with Session(bind=connection, expire_on_commit=False) as session, session.begin():
                yield session

    # --- bots ---

    def register_bot(self, name: str, owner: str) -> tuple[BotInfo, str]:
        """Registers a bot, or a new version of one, and returns it with its new token.

        The token is shown to the owner once and never stored. Registering an existing name
        (same owner) bumps the version, keeps rating and history, replaces the token (the old
        one stops working at once) and brings a retired bot back.
        """
        _check_bot_name(name)
        _check_owner(owner)
        token = secrets.token_urlsafe(32)
        digest = hash_token(token)
        now = self._now()
        for attempt in range(2):
            try:
                with self._transaction(write=True) as session:
                    bot = session.scalars(
                        select(Bot).where(Bot.name == name).with_for_update()
                    ).one_or_none()
                    if bot is None:
                        bot = Bot(
                            name=name,
                            owner=owner,
                            version=1,
                            token_hash=digest,
                            retired=False,
                            created_at=now,
                        )
                        session.add(bot)
                        session.flush()
                    elif bot.owner != owner:
                        raise BotOwnerError(f"{name} belongs to {bot.owner}, not {owner}")
                    else:
                        bot.version += 1
                        bot.token_hash = digest
                        bot.retired = False
                    session.add(BotVersion(bot_id=bot.id, version=bot.version, registered_at=now))
                    session.flush()
                    return _bot_info(bot), token
            except IntegrityError:
                # Two first registrations of one name raced; the second now finds the first.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def retire_bot(self, name: str) -> BotInfo:
        """Takes a bot off the ladder: its token stops working, it leaves the leaderboard and
        gets no new seat. Its matches and ratings stay; registering the name again revives it."""
        with self._transaction(write=True) as session:
            bot = _bot_by_name(session, name, lock=True)
            bot.retired = True
            return _bot_info(bot)

    def authenticate(self, token: str) -> BotInfo | None:
        """The bot whose current token this is, or None (unknown, revoked or retired)."""
        if not isinstance(token, str) or not token:
            return None
        try:
            digest = hash_token(token)
        except UnicodeEncodeError:
            return None
        with self._transaction(write=False) as session:
            bot = session.scalars(select(Bot).where(Bot.token_hash == digest)).one_or_none()
            # The lookup is by an index; compare_digest keeps the final check constant-time.
            if bot is None or not hmac.compare_digest(bot.token_hash, digest) or bot.retired:
                return None
            return _bot_info(bot)

    def get_bot(self, name: str) -> BotInfo | None:
        with self._transaction(write=False) as session:
            bot = session.scalars(select(Bot).where(Bot.name == name)).one_or_none()
            return None if bot is None else _bot_info(bot)

    def list_bots(self, include_retired: bool = False) -> list[BotInfo]:
        """Bots by name."""
        query = select(Bot).order_by(Bot.name)
        if not include_retired:
            query = query.where(Bot.retired.is_(False))
        with self._transaction(write=False) as session:
            return [_bot_info(bot) for bot in session.scalars(query)]

    def set_probation(self, name: str, reason: str | None) -> BotInfo:
        """Puts a bot on probation (the matchmaker gives it only unrated games) or, with None,
        takes it off. ``probation_since`` keeps the start while the reason changes."""
        now = self._now()
        with self._transaction(write=True) as session:
            bot = _bot_by_name(session, name, lock=True)
            if reason is None:
                bot.probation_reason = None
                bot.probation_since = None
            else:
                if bot.probation_since is None:
                    bot.probation_since = now
                bot.probation_reason = reason
            return _bot_info(bot)

    def bot_versions(self, name: str) -> list[BotVersionInfo]:
        with self._transaction(write=False) as session:
            bot = _bot_by_name(session, name)
            return self._versions(session, bot.id)

    @staticmethod
    def _versions(session: Session, bot_id: int) -> list[BotVersionInfo]:
        rows = session.scalars(
            select(BotVersion).where(BotVersion.bot_id == bot_id).order_by(BotVersion.version)
        )
        return [BotVersionInfo(row.version, row.registered_at) for row in rows]

    # --- matches ---

    def start_match(
        self,
        match_id: str,
        table_size: int,
        seed: int,
        seats: Sequence[tuple[str, int]],
        rated: bool,
        challenge_id: int | None = None,
    ) -> MatchSummary:
        """Records a match the referee is about to play, before it starts.

        ``seats[i]`` is ``(bot name, bot version)`` of seat i. Writing it first is what lets
        :meth:`void_in_flight` find the matches a crash interrupted.
        """
        if not isinstance(match_id, str) or not match_id:
            raise InvalidInputError("a match id is a non-empty string")
        if not 2 <= table_size <= 5:
            raise InvalidInputError(f"SCOUT is played by 2 to 5, not {table_size}")
        if len(seats) != table_size:
            raise InvalidInputError(f"{len(seats)} seats for a table of {table_size}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
            raise InvalidInputError(f"a seed is an unsigned 64-bit integer, got {seed!r}")
        names = [name for name, _ in seats]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"a bot takes one seat per match: {names}")
        now = self._now()
        try:
            with self._transaction(write=True) as session:
                if session.get(Match, match_id) is not None:
                    raise DuplicateMatchError(match_id)
                if challenge_id is not None and session.get(Challenge, challenge_id) is None:
                    raise UnknownChallengeError(challenge_id)
                bots = []
                for name, version in seats:
                    bot = _bot_by_name(session, name)
                    if bot.retired:
                        raise BotRetiredError(name)
                    if session.get(BotVersion, (bot.id, version)) is None:
                        raise InvalidInputError(f"{name} has no version {version}")
                    bots.append((bot, version))
                match = Match(
                    id=match_id,
                    status="in_flight",
                    table_size=table_size,
                    seed=seed,
                    rated=rated,
                    challenge_id=challenge_id,
                    created_at=now,
                )
                session.add(match)
                session.flush()
                for seat, (bot, version) in enumerate(bots):
                    session.add(
                        MatchSeat(
                            match_id=match_id,
                            seat=seat,
                            bot_id=bot.id,
                            bot_version=version,
                            forfeited=False,
                            timeouts=0,
                            illegal_actions=0,
                        )
                    )
                session.flush()
                return _match_summaries(session, [match])[0]
        except IntegrityError as exc:
            # Every other constraint was checked above: a concurrent start took the id.
            raise DuplicateMatchError(match_id) from exc

    def finish_match(
        self,
        match_id: str,
        record_json: str,
        seats: Sequence[SeatResult],
        rating_updates: Mapping[str, tuple[float, float]],
    ) -> MatchSummary:
        """Stores a finished match: every seat's result, the full JSON record and the new
        ``(mu, sigma)`` of each rated bot, with one history row each, in ONE transaction.

        Any failure (an unknown or unseated bot in ``rating_updates``, a bad rank, a database
        error) rolls all of it back and leaves the match in flight. Rating rows are updated in
        bot-name order, so concurrent finishes sharing bots cannot deadlock on PostgreSQL.
        """
        results: dict[int, SeatResult] = {}
        for result in seats:
            if result.seat in results:
                raise InvalidInputError(f"seat {result.seat} reported twice")
            results[result.seat] = result
        try:
            json.loads(record_json)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"the record of {match_id} is not JSON: {exc}") from exc
        now = self._now()
        with self._transaction(write=True) as session:
            match = session.scalars(
                select(Match).where(Match.id == match_id).with_for_update()
            ).one_or_none()
            if match is None:
                raise UnknownMatchError(match_id)
            if match.status != "in_flight":
                raise MatchStateError(f"{match_id} is {match.status}, not in flight")
            if rating_updates and not match.rated:
                raise InvalidInputError(f"{match_id} is unrated but got rating updates")
            seated = {
                seat.seat: (seat, bot_name)
                for seat, bot_name in session.execute(
                    select(MatchSeat, Bot.name)
                    .join(Bot, Bot.id == MatchSeat.bot_id)
                    .where(MatchSeat.match_id == match_id)
                )
            }
            if set(results) != set(seated):
                raise InvalidInputError(
                    f"{match_id} has seats {sorted(seated)}, results for {sorted(results)}"
                )
            for number, (seat, bot_name) in sorted(seated.items()):
                result = results[number]
                if result.bot != bot_name:
                    raise InvalidInputError(f"seat {number} of {match_id} is {bot_name}")
                if not 1 <= result.rank <= match.table_size:
                    raise InvalidInputError(f"rank {result.rank} at a table of {match.table_size}")
                if result.timeouts < 0 or result.illegal_actions < 0:
                    raise InvalidInputError("timeouts and illegal actions are counts")
                seat.score = result.score
                seat.rank = result.rank
                seat.forfeited = result.forfeited
                seat.timeouts = result.timeouts
                seat.illegal_actions = result.illegal_actions
            match.status = "finished"
            match.finished_at = now
            match.record_json = record_json
            # Written now, not at commit: a failure below must undo real writes, and does.
            session.flush()

            bot_ids = {bot_name: seat.bot_id for seat, bot_name in seated.values()}
            for bot_name in sorted(rating_updates):
                mu, sigma = rating_updates[bot_name]
                bot_id = bot_ids.get(bot_name)
                if bot_id is None:
                    _bot_by_name(session, bot_name)  # raises UnknownBotError for a stranger
                    raise InvalidInputError(f"{bot_name} did not play {match_id}")
                _check_rating(bot_name, mu, sigma)
                session.execute(self._upsert_rating(bot_id, mu, sigma, now))
                session.execute(
                    insert(RatingHistory).values(
                        bot_id=bot_id, match_id=match_id, mu=mu, sigma=sigma, created_at=now
                    )
                )
            return _match_summaries(session, [match])[0]

    def _upsert_rating(
        self, bot_id: int, mu: float, sigma: float, now: datetime
    ) -> pg_dialect.Insert | sqlite_dialect.Insert:
        """INSERT ... ON CONFLICT: atomic even when two finishes create a bot's first rating."""
        values = {"bot_id": bot_id, "mu": mu, "sigma": sigma, "games": 1, "updated_at": now}
        if self._backend == "postgresql":
            pg = pg_dialect.insert(Rating).values(values)
            return pg.on_conflict_do_update(
                index_elements=[Rating.bot_id],
                set_={
                    "mu": pg.excluded.mu,
                    "sigma": pg.excluded.sigma,
                    "games": Rating.games + 1,
                    "updated_at": pg.excluded.updated_at,
                },
            )
        lite = sqlite_dialect.insert(Rating).values(values)
        return lite.on_conflict_do_update(
            index_elements=[Rating.bot_id],
            set_={
                "mu": lite.excluded.mu,
                "sigma": lite.excluded.sigma,
                "games": Rating.games + 1,
                "updated_at": lite.excluded.updated_at,
            },
        )

    def void_match(self, match_id: str, reason: str) -> bool:
        """Voids one in-flight match (the referee aborted it). False if it had already ended."""
        with self._transaction(write=True) as session:
            match = session.scalars(
                select(Match).where(Match.id == match_id).with_for_update()
            ).one_or_none()
            if match is None:
                raise UnknownMatchError(match_id)
            if match.status != "in_flight":
                return False
            match.status = "void"
            match.void_reason = reason
            return True

    def void_in_flight(self, reason: str) -> list[str]:
        """Voids every match still in flight and returns their ids, sorted.

        Run at startup: a match in flight then was interrupted by a crash or a restart, and
        will never report a result. Void matches are not rated and not counted anywhere.
        """
        with self._transaction(write=True) as session:
            ids = sorted(
                session.scalars(
                    select(Match.id).where(Match.status == "in_flight").with_for_update()
                )
            )
            for start in range(0, len(ids), _FETCH_BATCH):
                session.execute(
                    update(Match)
                    .where(Match.id.in_(ids[start : start + _FETCH_BATCH]))
                    .values(status="void", void_reason=reason)
                    .execution_options(synchronize_session=False)
                )
            return ids

    def get_match(self, match_id: str) -> MatchSummary | None:
        with self._transaction(write=False) as session:
            match = session.get(Match, match_id)
            return None if match is None else _match_summaries(session, [match])[0]

    def list_matches(
        self,
        bot: str | None = None,
        table_size: int | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        status: str | None = None,
    ) -> list[MatchSummary]:
        """Matches newest first, optionally only those ``bot`` sat in, at one table size or in
        one status. An unknown bot has played nothing: the list is empty."""
        query = select(Match)
        if bot is not None:
            query = query.where(
                Match.id.in_(
                    select(MatchSeat.match_id)
                    .join(Bot, Bot.id == MatchSeat.bot_id)
                    .where(Bot.name == bot)
                )
            )
        if table_size is not None:
            query = query.where(Match.table_size == table_size)
        if status is not None:
            query = query.where(Match.status == status)
        query = query.order_by(Match.created_at.desc(), Match.id.desc())
        query = query.limit(max(limit, 0)).offset(max(offset, 0))
        with self._transaction(write=False) as session:
            return _match_summaries(session, list(session.scalars(query)))

    def get_record(self, match_id: str) -> str | None:
        """The match's JSON record; None if the match is unknown, in flight or void."""
        with self._transaction(write=False) as session:
            return session.scalar(select(Match.record_json).where(Match.id == match_id))

    def iter_finished_matches(
        self, *, rated_only: bool = True, batch_size: int = _FETCH_BATCH
    ) -> Iterator[FinishedMatch]:
        """Finished matches in the order they finished, seats with bot names and ranks: what a
        rating recompute replays. Reads in batches, each its own short transaction, so a long
        recompute holds no transaction open."""
        after: tuple[datetime, str] | None = None
        while True:
            query = select(Match).where(Match.status == "finished")
            if rated_only:
                query = query.where(Match.rated.is_(True))
            if after is not None:
                finished_at, match_id = after
                query = query.where(
                    or_(
                        Match.finished_at > finished_at,
                        and_(Match.finished_at == finished_at, Match.id > match_id),
                    )
                )
            query = query.order_by(Match.finished_at, Match.id).limit(batch_size)
            with self._transaction(write=False) as session:
                batch = [
                    _finished_match(summary)
                    for summary in _match_summaries(session, list(session.scalars(query)))
                ]
            yield from batch
            if len(batch) < batch_size:
                return
            after = (batch[-1].finished_at, batch[-1].match_id)

    def recent_seat_results(self, bot_name: str, n: int) -> list[BotResult]:
        """The bot's ``n`` latest finished matches, newest first, rated or not: what probation
        looks at (timeouts, forfeits, illegal actions). ``bot_version`` tells the versions
        apart, so a fixed new version need not answer for the old one."""
        with self._transaction(write=False) as session:
            bot = _bot_by_name(session, bot_name)
            return self._recent_results(session, bot.id, n)

    @staticmethod
    def _recent_matches(session: Session, bot_id: int, n: int) -> list[MatchSummary]:
        matches = session.scalars(
            select(Match)
            .join(MatchSeat, MatchSeat.match_id == Match.id)
            .where(MatchSeat.bot_id == bot_id, Match.status == "finished")
            .order_by(Match.finished_at.desc(), Match.id.desc())
            .limit(max(n, 0))
        )
        return _match_summaries(session, list(matches))

    @staticmethod
    def _recent_results(session: Session, bot_id: int, n: int) -> list[BotResult]:
        rows = session.execute(
            select(Match, MatchSeat)
            .join(MatchSeat, MatchSeat.match_id == Match.id)
            .where(MatchSeat.bot_id == bot_id, Match.status == "finished")
            .order_by(Match.finished_at.desc(), Match.id.desc())
            .limit(max(n, 0))
        )
        return [_bot_result(match, seat) for match, seat in rows]

    # --- ratings ---

    def ratings(self) -> dict[str, RatingInfo]:
        """Every bot's current rating, retired bots included; a bot that never played a rated
        match has none (the ratings module starts it at the TrueSkill default)."""
        with self._transaction(write=False) as session:
            rows = session.execute(select(Rating, Bot.name).join(Bot, Bot.id == Rating.bot_id))
            return {name: self._rating_info(rating, name) for rating, name in rows}

    @staticmethod
    def _rating_info(rating: Rating, name: str) -> RatingInfo:
        return RatingInfo(name, rating.mu, rating.sigma, rating.games, rating.updated_at)

    def leaderboard(self) -> list[LeaderboardRow]:
        """Rated, unretired bots by mu - 3 sigma, best first (ties by name)."""
        with self._transaction(write=False) as session:
            return self._leaderboard(session)

    @staticmethod
    def _leaderboard(session: Session) -> list[LeaderboardRow]:
        rows = session.execute(
            select(Rating, Bot).join(Bot, Bot.id == Rating.bot_id).where(Bot.retired.is_(False))
        )
        standings = sorted(rows, key=lambda row: (-(row[0].mu - 3 * row[0].sigma), row[1].name))
        position = (
            func.row_number()
            .over(
                partition_by=MatchSeat.bot_id,
                order_by=(Match.finished_at.desc(), Match.id.desc()),
            )
            .label("position")
        )
        latest = (
            select(MatchSeat.bot_id, MatchSeat.rank, position)
            .join(Match, Match.id == MatchSeat.match_id)
            .where(Match.status == "finished", Match.rated.is_(True))
            .subquery()
        )
        form: dict[int, list[int]] = defaultdict(list)
        for bot_id, rank in session.execute(
            select(latest.c.bot_id, latest.c.rank)
            .where(latest.c.position <= RECENT_FORM_LENGTH)
            .order_by(latest.c.bot_id, latest.c.position)
        ):
            form[bot_id].append(rank)
        return [
            LeaderboardRow(
                rank=index,
                bot=bot.name,
                owner=bot.owner,
                mu=rating.mu,
                sigma=rating.sigma,
                conservative=rating.mu - 3 * rating.sigma,
                games=rating.games,
                recent_ranks=tuple(form[bot.id]),
                on_probation=bot.probation_reason is not None,
            )
            for index, (rating, bot) in enumerate(standings, start=1)
        ]

    def replace_ratings(
        self,
        ratings: Mapping[str, tuple[float, float]],
        history: Iterable[RatingHistoryEntry],
    ) -> None:
        """Replaces every rating and the whole rating history in one transaction: the end of
        a recompute. ``history`` is in the order the ratings were applied; each bot's game
        count is its number of history rows, as it is after ``finish_match``."""
        entries = list(history)
        now = self._now()
        for name, (mu, sigma) in ratings.items():
            _check_rating(name, mu, sigma)
        for entry in entries:
            _check_rating(entry.bot, entry.mu, entry.sigma)
            if entry.bot not in ratings:
                raise InvalidInputError(f"{entry.bot} has history but no rating")
        with self._transaction(write=True) as session:
            bot_ids = dict(session.execute(select(Bot.name, Bot.id)).all())
            for name in ratings:
                if name not in bot_ids:
                    raise UnknownBotError(name)
            finished = dict(
                session.execute(
                    select(Match.id, Match.finished_at).where(
                        Match.status == "finished", Match.rated.is_(True)
                    )
                ).all()
            )
            for entry in entries:
                if entry.match_id not in finished:
                    raise InvalidInputError(f"{entry.match_id} is not a finished rated match")
            games = Counter(entry.bot for entry in entries)
            session.execute(delete(RatingHistory))
            session.execute(delete(Rating))
            if ratings:
                session.execute(
                    insert(Rating),
                    [
                        {
                            "bot_id": bot_ids[name],
                            "mu": mu,
                            "sigma": sigma,
                            "games": games[name],
                            "updated_at": now,
                        }
                        for name, (mu, sigma) in ratings.items()
                    ],
                )
            for start in range(0, len(entries), _FETCH_BATCH):
                session.execute(
                    insert(RatingHistory),
                    [
                        {
                            "bot_id": bot_ids[entry.bot],
                            "match_id": entry.match_id,
                            "mu": entry.mu,
                            "sigma": entry.sigma,
                            # The graph's x axis is when the match finished, not the recompute.
                            "created_at": finished[entry.match_id],
                        }
                        for entry in entries[start : start + _FETCH_BATCH]
                    ],
                )

    def bot_profile(self, name: str, recent: int = 10) -> BotProfile | None:
        """Everything a bot's page shows, read in one transaction; None for an unknown name,
        like the other lookups."""
        with self._transaction(write=False) as session:
            bot = session.scalars(select(Bot).where(Bot.name == name)).one_or_none()
            if bot is None:
                return None
            rating = session.get(Rating, bot.id)
            history = session.scalars(
                select(RatingHistory)
                .where(RatingHistory.bot_id == bot.id)
                .order_by(RatingHistory.id)
            )
            points = tuple(RatingPoint(h.match_id, h.mu, h.sigma, h.created_at) for h in history)
            per_size = session.execute(
                select(
                    Match.table_size,
                    func.count(),
                    func.sum(case((MatchSeat.rank == 1, 1), else_=0)),
                    func.avg(MatchSeat.rank),
                    func.avg(MatchSeat.score),
                    func.sum(MatchSeat.timeouts),
                    func.sum(case((MatchSeat.forfeited.is_(True), 1), else_=0)),
                    func.sum(MatchSeat.illegal_actions),
                )
                .join(Match, Match.id == MatchSeat.match_id)
                .where(MatchSeat.bot_id == bot.id, Match.status == "finished")
                .group_by(Match.table_size)
                .order_by(Match.table_size)
            ).all()
            by_size = tuple(
                TableSizeRecord(
                    table_size=row[0],
                    matches=int(row[1]),
                    wins=int(row[2]),
                    mean_rank=float(row[3]),
                    mean_score=float(row[4]),
                )
                for row in per_size
            )
            leaderboard_rank = next(
                (row.rank for row in self._leaderboard(session) if row.bot == name), None
            )
            return BotProfile(
                bot=_bot_info(bot),
                rating=None if rating is None else self._rating_info(rating, name),
                leaderboard_rank=leaderboard_rank,
                versions=tuple(self._versions(session, bot.id)),
                history=points,
                by_table_size=by_size,
                matches_finished=sum(record.matches for record in by_size),
                timeouts=sum(int(row[5]) for row in per_size),
                forfeits=sum(int(row[6]) for row in per_size),
                illegal_actions=sum(int(row[7]) for row in per_size),
                recent_matches=tuple(self._recent_matches(session, bot.id, recent)),
            )

    # --- challenges ---

    def create_challenge(
        self, owner: str, bot: str, opponents: Sequence[str], games: int
    ) -> ChallengeInfo:
        """An owner asks for ``games`` matches of ``bot`` against ``opponents`` (names)."""
        _check_owner(owner)
        if games < 1:
            raise InvalidInputError(f"a challenge asks for at least one game, not {games}")
        if not opponents or len(set(opponents)) != len(opponents) or bot in opponents:
            raise InvalidInputError(f"opponents must be distinct other bots: {list(opponents)}")
        if len(opponents) > 4:
            raise InvalidInputError("a SCOUT table seats at most 5")
        now = self._now()
        with self._transaction(write=True) as session:
            challenger = _bot_by_name(session, bot)
            for name in (bot, *opponents):
                if _bot_by_name(session, name).retired:
                    raise BotRetiredError(name)
            challenge = Challenge(
                owner=owner,
                bot_id=challenger.id,
                opponents_json=json.dumps(list(opponents)),
                games_requested=games,
                games_played=0,
                created_at=now,
                status="open",
            )
            session.add(challenge)
            session.flush()
            return self._challenge_infos(session, [challenge])[0]

    def get_challenge(self, challenge_id: int) -> ChallengeInfo | None:
        with self._transaction(write=False) as session:
            challenge = session.get(Challenge, challenge_id)
            return None if challenge is None else self._challenge_infos(session, [challenge])[0]

    def open_challenges(self) -> list[ChallengeInfo]:
        """Open challenges, oldest first: the matchmaker serves them in that order."""
        with self._transaction(write=False) as session:
            challenges = list(
                session.scalars(
                    select(Challenge)
                    .where(Challenge.status == "open")
                    .order_by(Challenge.created_at, Challenge.id)
                )
            )
            return self._challenge_infos(session, challenges)

    def challenge_played(self, challenge_id: int) -> ChallengeInfo:
        """Counts one more finished game of a challenge; it is done once all were played."""
        with self._transaction(write=True) as session:
            challenge = self._challenge_for_update(session, challenge_id)
            challenge.games_played += 1
            if challenge.status == "open" and challenge.games_played >= challenge.games_requested:
                challenge.status = "done"
            session.flush()
            return self._challenge_infos(session, [challenge])[0]

    def cancel_challenge(self, challenge_id: int) -> ChallengeInfo:
        """Stops an open challenge; its matches in flight still finish and count."""
        with self._transaction(write=True) as session:
            challenge = self._challenge_for_update(session, challenge_id)
            if challenge.status == "open":
                challenge.status = "cancelled"
            session.flush()
            return self._challenge_infos(session, [challenge])[0]

    @staticmethod
    def _challenge_for_update(session: Session, challenge_id: int) -> Challenge:
        challenge = session.scalars(
            select(Challenge).where(Challenge.id == challenge_id).with_for_update()
        ).one_or_none()
        if challenge is None:
            raise UnknownChallengeError(challenge_id)
        return challenge

    @staticmethod
    def _challenge_infos(session: Session, challenges: Sequence[Challenge]) -> list[ChallengeInfo]:
        ids = [challenge.id for challenge in challenges]
        names = dict(
            session.execute(
                select(Bot.id, Bot.name).where(
                    Bot.id.in_({challenge.bot_id for challenge in challenges})
                )
            ).all()
        )
        in_flight = dict(
            session.execute(
                select(Match.challenge_id, func.count())
                .where(Match.challenge_id.in_(ids), Match.status == "in_flight")
                .group_by(Match.challenge_id)
            ).all()
        )
        return [
            ChallengeInfo(
                id=challenge.id,
                owner=challenge.owner,
                bot=names[challenge.bot_id],
                opponents=tuple(json.loads(challenge.opponents_json)),
                games_requested=challenge.games_requested,
                games_played=challenge.games_played,
                games_in_flight=int(in_flight.get(challenge.id, 0)),
                status=challenge.status,
                created_at=challenge.created_at,
            )
            for challenge in challenges
        ]
