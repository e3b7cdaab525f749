"""Bots and their tokens: registration, versions, retirement, authentication and probation.

Tokens are never stored. Only their SHA-256 is, so a copy of the database lets nobody play as a
bot.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from scout_arena.text import echo
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, BotVersion, Owner

from .common import (
    bot_by_name,
    bot_info,
    check_bot_name,
    check_owner,
    is_bot_name,
    next_version,
    supersede_active,
    version_info,
)
from .database import Database
from .errors import BotKindError, BotOwnerError
from .results import BotInfo, BotKind, BotVersionInfo, VersionStatus


def hash_token(token: str) -> str:
    """The stored form of a bot token: SHA-256, hex. Tokens are 256 random bits, so a plain
    hash (no salt, no stretching) is enough and lets authentication be one indexed lookup."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token(nbytes: int = 32) -> str:
    """A fresh secret (``nbytes`` random bytes, URL-safe) that never starts with "-": a token
    is passed as ``--token TOKEN``/``--owner-token TOKEN``, and argparse takes a value that
    starts with "-" for an option (one token in 64 did)."""
    while True:
        token = secrets.token_urlsafe(nbytes)
        if not token.startswith("-"):
            return token


def versions_of(session: Session, bot_id: int, bot: str = "") -> list[BotVersionInfo]:
    rows = session.scalars(
        select(BotVersion).where(BotVersion.bot_id == bot_id).order_by(BotVersion.version)
    )
    return [version_info(row, bot) for row in rows]


def new_remote_version(session: Session, bot: Bot, digest: str, now: datetime) -> None:
    """A remote bot's next version, active at once, with a new token (the old one stops
    working) and out of retirement."""
    if bot.kind != BotKind.REMOTE:
        raise BotKindError(f"{bot.name} is a hosted bot: new versions of it are uploads "
                           "(SubmitVersion, `scout-arena ladder submit`)")
    supersede_active(session, bot.id)
    bot.version = next_version(session, bot.id)
    bot.token_hash = digest
    bot.retired = False
    session.add(BotVersion(bot_id=bot.id, version=bot.version, registered_at=now,
                           status=VersionStatus.ACTIVE))


class BotStore(Database):
    """The bot queries of :class:`~scout_ladder.repository.Repository`."""

    def register_bot(self, name: str, owner: str) -> tuple[BotInfo, str]:
        """Registers a bot, or a new version of one, and returns it with its new token.

        The token is shown to the owner once and never stored. Registering an existing name
        (same owner) bumps the version, keeps rating and history, replaces the token (the old
        one stops working at once) and brings a retired bot back.
        """
        check_bot_name(name)
        check_owner(owner)
        token = new_token()
        digest = hash_token(token)
        now = self._now()
        for attempt in range(2):
            try:
                with self._transaction(write=True) as session:
                    bot = session.scalars(
                        select(Bot).where(Bot.name == name).with_for_update()
                    ).one_or_none()
                    if bot is None:
                        account = session.scalars(
                            select(Owner).where(Owner.name == owner)).one_or_none()
                        bot = Bot(
                            name=name,
                            owner=owner,
                            version=0,
                            token_hash=digest,
                            retired=False,
                            created_at=now,
                            kind=BotKind.REMOTE,
                            owner_id=None if account is None else account.id,
                            account=account,
                        )
                        session.add(bot)
                        session.flush()
                    elif bot.owner != owner:
                        raise BotOwnerError(
                            f"{name} belongs to {echo(bot.owner)}, not {echo(owner)}: a new "
                            "version keeps its owner"
                        )
                    new_remote_version(session, bot, digest, now)
                    session.flush()
                    return bot_info(bot), token
            except IntegrityError:
                # Two first registrations of one name raced; the second now finds the first.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def retire_bot(self, name: str) -> BotInfo:
        """Takes a bot off the ladder: its token stops working, it leaves the leaderboard and
        gets no new seat. Its matches and ratings stay; registering the name again revives it."""
        with self._transaction(write=True) as session:
            bot = bot_by_name(session, name, lock=True)
            bot.retired = True
            return bot_info(bot)

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
            return bot_info(bot)

    def get_bot(self, name: str) -> BotInfo | None:
        if not is_bot_name(name):
            return None
        with self._transaction(write=False) as session:
            bot = session.scalars(select(Bot).where(Bot.name == name)).one_or_none()
            return None if bot is None else bot_info(bot)

    def list_bots(self, include_retired: bool = False) -> list[BotInfo]:
        """Bots by name."""
        query = select(Bot).order_by(Bot.name)
        if not include_retired:
            query = query.where(Bot.retired.is_(False))
        with self._transaction(write=False) as session:
            return [bot_info(bot) for bot in session.scalars(query)]

    def set_probation(self, name: str, reason: str | None) -> BotInfo:
        """Puts a bot on probation (the matchmaker gives it only unrated games) or, with None,
        takes it off. ``probation_since`` keeps the start while the reason changes."""
        now = self._now()
        with self._transaction(write=True) as session:
            bot = bot_by_name(session, name, lock=True)
            if reason is None:
                bot.probation_reason = None
                bot.probation_since = None
            else:
                if bot.probation_since is None:
                    bot.probation_since = now
                bot.probation_reason = reason
            return bot_info(bot)

    def bot_versions(self, name: str) -> list[BotVersionInfo]:
        with self._transaction(write=False) as session:
            bot = bot_by_name(session, name)
            return versions_of(session, bot.id, bot.name)
