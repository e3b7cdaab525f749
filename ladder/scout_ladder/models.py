"""The ladder's tables, as SQLAlchemy 2.x typed ORM classes.

These classes stay inside ``scout_ladder``: the repository hands out frozen dataclasses instead,
so that no caller can trigger a lazy load on a closed session or change a row by accident.
They live apart from ``repository`` so that Alembic's ``env.py`` (and the test that checks
the migrations against the models) can read the metadata without the repository's behaviour.

The words are the game's: a *bot* sits in a *seat* of a *match*; a *table size* is the number of
players (2 to 5); a *rank* is a competition rank (equal scores share it, 1 is best).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

# Named constraints make migrations reproducible: without names, each backend invents its own
# and a later migration cannot drop or alter a constraint portably.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

MATCH_STATUSES = ("in_flight", "finished", "void")
BOT_KINDS = ("remote", "hosted")
VERSION_STATUSES = ("validating", "active", "rejected", "superseded")
CHALLENGE_STATUSES = ("open", "done", "cancelled")

SEED_LIMIT = 2**64
"""Seeds are unsigned 64-bit integers: larger than BIGINT (signed) and than what SQLite's
INTEGER or a double hold exactly, so they are stored as decimal text."""

NAME_LENGTH = 64
OWNER_LENGTH = 128
MATCH_ID_LENGTH = 128
SHA256_HEX_LENGTH = 64


class Seed(TypeDecorator[int]):
    """An unsigned 64-bit deal seed, stored as its decimal digits.

    BIGINT stops at 2**63 - 1 and SQLite would silently turn a larger integer into a REAL, losing
    the low bits: the deal of such a match could no longer be reproduced.
    """

    impl = String(20)
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"a seed is an int, not {type(value).__name__}")
        if not 0 <= value < SEED_LIMIT:
            raise ValueError(f"a seed is an unsigned 64-bit integer, got {value}")
        return str(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> int | None:
        return None if value is None else int(value)


class UtcDateTime(TypeDecorator[datetime]):
    """A moment in UTC, always returned timezone-aware.

    PostgreSQL keeps the offset but SQLite drops it; converting to UTC on the way in and tagging
    UTC on the way out gives both backends the same values and the same sort order.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("the ladder stores only timezone-aware datetimes")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Bot(Base):
    """A registered bot. Its name is its identity on the ladder across versions: registering the
    same name again makes a new version (and a new token) but keeps the rating and the history.
    Only the SHA-256 of the current token is kept, so a leaked database leaks no credentials."""

    __tablename__ = "bots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    owner: Mapped[str] = mapped_column(String(OWNER_LENGTH))
    version: Mapped[int] = mapped_column(Integer)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    retired: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    probation_reason: Mapped[str | None] = mapped_column(Text)
    probation_since: Mapped[datetime | None] = mapped_column(UtcDateTime)
    kind: Mapped[str] = mapped_column(String(16), server_default="remote")
    """``remote`` (its owner runs it and connects with its token) or ``hosted`` (the ladder
    runs its uploaded versions in a sandbox)."""
    paused_reason: Mapped[str | None] = mapped_column(Text)
    """Why a hosted bot is not scheduled (it kept crashing...); cleared by a version that
    passes validation. NULL: not paused."""
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("owners.id"))
    """The owner account; NULL for a bot the operator registered for a free-text owner."""
    account: Mapped[Owner | None] = relationship(lazy="selectin")
    """Loaded with the bot in one more query per batch, so that a bot's info says whether its
    owner is suspended (a join would not combine with FOR UPDATE on PostgreSQL)."""

    __table_args__ = (
        # 0: a hosted bot none of whose versions has passed validation yet (never seated:
        # a seat's version must be a row of bot_versions, and numbers start at 1).
        CheckConstraint("version >= 0", name="version_not_negative"),
        CheckConstraint("kind IN ('remote', 'hosted')", name="kind_known"),
        Index(None, "owner_id"),
    )


class BotVersion(Base):
    """One row per version of a bot, so that a seat can say which version played it.

    A remote bot's versions are its registrations (active at once). A hosted bot's are its
    uploads: ``validating`` until the validator decides, then ``active`` (the one that plays;
    ``bots.version`` names it) or ``rejected`` with the reason and the validation's output;
    an active version becomes ``superseded`` when a newer one passes. The upload itself is a
    file of the ladder's storage folder (`repository.files`); this row says it exists.
    """

    __tablename__ = "bot_versions"

    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    registered_at: Mapped[datetime] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(String(16), server_default="active")
    reason: Mapped[str | None] = mapped_column(Text)
    validation_output: Mapped[str | None] = mapped_column(Text)
    archive_sha256: Mapped[str | None] = mapped_column(String(SHA256_HEX_LENGTH))
    archive_size: Mapped[int | None] = mapped_column(Integer)
    runtime: Mapped[str | None] = mapped_column(String(16))
    command_json: Mapped[str | None] = mapped_column(Text)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        CheckConstraint(
            "status IN ('validating', 'active', 'rejected', 'superseded')", name="status_known"
        ),
        Index(None, "status"),
    )


class Owner(Base):
    """An owner account: signs up with an invite (or freely, as the ladder's registration
    policy says) and acts on its own bots with its owner token, of which only the SHA-256 is
    kept. A suspended owner's bots are not scheduled; the reason shows on their profiles."""

    __tablename__ = "owners"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(OWNER_LENGTH), unique=True)
    token_hash: Mapped[str] = mapped_column(String(SHA256_HEX_LENGTH), unique=True)
    suspended_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Invite(Base):
    """A single-use signup code the admin made; only its SHA-256 is kept."""

    __tablename__ = "invites"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(SHA256_HEX_LENGTH), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    used_by: Mapped[int | None] = mapped_column(ForeignKey("owners.id"))


class HostedRun(Base):
    """What one hosted run of a bot left: why it ended and the tail of its output, which only
    its owner may read. Validation runs have match ids of their own (no ``matches`` row), so
    the match id is plain text. Only the newest runs of each bot are kept."""

    __tablename__ = "hosted_runs"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"))
    match_id: Mapped[str] = mapped_column(String(MATCH_ID_LENGTH))
    version: Mapped[int] = mapped_column(Integer)
    outcome_reason: Mapped[str] = mapped_column(Text)
    output_tail: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (UniqueConstraint("bot_id", "match_id"),)


class Rating(Base):
    """A bot's current TrueSkill rating. A bot has no row until its first rated match: the
    ratings module, not the storage, knows the TrueSkill environment's starting values."""

    __tablename__ = "ratings"

    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"), primary_key=True)
    mu: Mapped[float] = mapped_column(Float)
    sigma: Mapped[float] = mapped_column(Float)
    games: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class RatingHistory(Base):
    """The rating a bot had right after each rated match: one row per rated match per bot, in
    the order the ratings were applied (the id), which is what a profile graph draws."""

    __tablename__ = "rating_history"

    # The one table that grows by table_size rows per rated match, day and night: BIGINT where
    # it matters, INTEGER on SQLite because only "INTEGER PRIMARY KEY" is its rowid.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"))
    match_id: Mapped[str] = mapped_column(ForeignKey("matches.id"))
    mu: Mapped[float] = mapped_column(Float)
    sigma: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)

    __table_args__ = (
        UniqueConstraint("bot_id", "match_id"),
        Index(None, "match_id"),
    )


class Challenge(Base):
    """An owner's request that their bot play a number of matches against named opponents."""

    __tablename__ = "challenges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(OWNER_LENGTH))
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"))
    opponents_json: Mapped[str] = mapped_column(Text)
    games_requested: Mapped[int] = mapped_column(Integer)
    games_played: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(String(16))

    __table_args__ = (
        CheckConstraint("games_requested >= 1", name="games_requested_positive"),
        CheckConstraint("games_played >= 0", name="games_played_not_negative"),
        CheckConstraint(
            "status IN ('open', 'done', 'cancelled')",
            name="status_known",
        ),
        Index(None, "status"),
    )


class Match(Base):
    """A match the ladder asked the referee for. It is written when it starts (``in_flight``),
    so that a crash leaves a trace that startup turns into ``void``; the result, the record
    and the ratings arrive together when it finishes."""

    __tablename__ = "matches"

    id: Mapped[str] = mapped_column(String(MATCH_ID_LENGTH), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    table_size: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Seed)
    rated: Mapped[bool] = mapped_column(Boolean)
    challenge_id: Mapped[int | None] = mapped_column(ForeignKey("challenges.id"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    void_reason: Mapped[str | None] = mapped_column(Text)
    record_json: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint("status IN ('in_flight', 'finished', 'void')", name="status_known"),
        CheckConstraint("table_size BETWEEN 2 AND 5", name="table_size_2_to_5"),
        Index(None, "status"),
        Index(None, "finished_at"),
        Index(None, "created_at"),
        Index(None, "challenge_id"),
    )


class MatchSeat(Base):
    """Who sat where, and, once the match is over, how it went for them."""

    __tablename__ = "match_seats"

    match_id: Mapped[str] = mapped_column(ForeignKey("matches.id"), primary_key=True)
    seat: Mapped[int] = mapped_column(Integer, primary_key=True)
    bot_id: Mapped[int] = mapped_column(ForeignKey("bots.id"))
    bot_version: Mapped[int] = mapped_column(Integer)
    score: Mapped[int | None] = mapped_column(Integer)
    rank: Mapped[int | None] = mapped_column(Integer)
    forfeited: Mapped[bool] = mapped_column(Boolean)
    timeouts: Mapped[int] = mapped_column(Integer)
    illegal_actions: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        # The version must be one the bot really registered.
        ForeignKeyConstraint(
            ["bot_id", "bot_version"], ["bot_versions.bot_id", "bot_versions.version"]
        ),
        # One seat per bot: rating updates are keyed by bot.
        UniqueConstraint("match_id", "bot_id"),
        CheckConstraint("seat BETWEEN 0 AND 4", name="seat_0_to_4"),
        Index(None, "bot_id"),
    )
