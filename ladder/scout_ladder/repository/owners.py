"""Owner accounts and what an owner does to their own bots: sign up (with a single-use invite
when the ladder asks for one), register remote or hosted bots, rotate tokens, retire, and the
admin's suspension.

Owner tokens and invite codes are kept like bot tokens: only their SHA-256. Who acts is an
argument of every call that changes a bot (``as_owner``: an account's name, or None for the
admin), and the check that the bot is theirs runs in the same transaction as the change.
"""

from __future__ import annotations

import hmac

from scout_arena.text import echo
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, Invite, Owner

from .bots import hash_token, new_remote_version, new_token
from .common import bot_by_name, bot_info, check_bot_name, check_owner
from .database import Database
from .errors import (
    BotKindError,
    BotOwnerError,
    InvalidInputError,
    InviteError,
    NotYourBotError,
    OwnerExistsError,
    OwnerSuspendedError,
    TooManyBotsError,
    UnknownOwnerError,
)
from .results import BotInfo, BotKind, OwnerInfo, OwnerProfile

REASON_LENGTH = 500


def check_reason(reason: str) -> None:
    """A suspension or pause reason is shown on public pages: 1-500 printable characters."""
    if (not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_LENGTH
            or any(not char.isprintable() for char in reason)):
        raise InvalidInputError(f"a reason is 1-{REASON_LENGTH} printable characters; got "
                                f"{echo(reason)}")


def owner_info(owner: Owner) -> OwnerInfo:
    return OwnerInfo(name=owner.name, suspended_reason=owner.suspended_reason,
                     created_at=owner.created_at)


def owner_by_name(session: Session, name: str, *, lock: bool = False) -> Owner:
    if not isinstance(name, str) or not name or "\x00" in name:
        raise UnknownOwnerError(name)
    query = select(Owner).where(Owner.name == name)
    if lock:
        query = query.with_for_update()
    owner = session.scalars(query).one_or_none()
    if owner is None:
        raise UnknownOwnerError(name)
    return owner


def acting_owner(session: Session, as_owner: str | None, *, write: bool) -> Owner | None:
    """The account acting (None: the admin). A suspended owner may read, not write."""
    if as_owner is None:
        return None
    owner = owner_by_name(session, as_owner, lock=write)
    if write and owner.suspended_reason is not None:
        raise OwnerSuspendedError(f"the owner {echo(owner.name)} is suspended: "
                                  f"{owner.suspended_reason}")
    return owner


def owned_bot(session: Session, name: str, as_owner: str | None, *, write: bool) -> Bot:
    """The bot, if the actor may act on it: the admin on any, an owner on their own only."""
    owner = acting_owner(session, as_owner, write=write)
    bot = bot_by_name(session, name, lock=write)
    if owner is not None and bot.owner_id != owner.id:
        raise NotYourBotError(f"{name} is not a bot of {echo(owner.name)}")
    return bot


def check_bot_room(session: Session, owner: Owner, limit: int) -> None:
    count = session.scalar(select(func.count()).select_from(Bot).where(
        Bot.owner_id == owner.id, Bot.retired.is_(False))) or 0
    if count >= limit:
        raise TooManyBotsError(f"{echo(owner.name)} has {count} bots, the most an owner may "
                               f"have on this ladder ({limit}); retire one first")


class OwnerStore(Database):
    """The owner queries of :class:`~scout_ladder.repository.Repository`."""

    def create_owner(self, name: str, invite: str | None = None, *,
                     by_admin: bool = False) -> tuple[OwnerInfo, str]:
        """Makes an owner account and returns it with its token (shown once, stored hashed).

        With ``invite``, the code must be one the admin made and nobody used; it is used up
        in the same transaction. A name that owns bots the operator registered for no
        account is refused, unless the admin makes the account: then those bots become its.
        """
        check_owner(name)
        token = new_token()
        now = self._now()
        try:
            with self._transaction(write=True) as session:
                if session.scalars(select(Owner.id).where(Owner.name == name)).first():
                    raise OwnerExistsError(f"an owner named {echo(name)} exists already")
                orphans = list(session.scalars(select(Bot).where(
                    Bot.owner == name, Bot.owner_id.is_(None)).with_for_update()))
                if orphans and not by_admin:
                    raise OwnerExistsError(
                        f"the name {echo(name)} owns bots the ladder's operator registered; "
                        "only the operator can make that account")
                owner = Owner(name=name, token_hash=hash_token(token), created_at=now)
                session.add(owner)
                session.flush()
                if invite is not None:
                    self._use_invite(session, invite, owner)
                for bot in orphans:
                    bot.owner_id = owner.id
                return owner_info(owner), token
        except IntegrityError:
            # Two signups of one name raced; the loser's transaction is gone.
            raise OwnerExistsError(f"an owner named {echo(name)} exists already") from None

    def _use_invite(self, session: Session, code: str, owner: Owner) -> None:
        try:
            digest = hash_token(code)
        except UnicodeEncodeError:
            raise InviteError("the invite code is not valid") from None
        # Locked, so that two signups with one code cannot both take it.
        invite = session.scalars(select(Invite).where(Invite.code_hash == digest)
                                 .with_for_update()).one_or_none()
        if invite is None or invite.used_at is not None:
            raise InviteError("the invite code is unknown or used already")
        invite.used_at = self._now()
        invite.used_by = owner.id

    def create_invite(self) -> str:
        """A new single-use signup code (the admin's); only its hash is kept."""
        code = new_token(18)
        with self._transaction(write=True) as session:
            session.add(Invite(code_hash=hash_token(code), created_at=self._now()))
        return code

    def authenticate_owner(self, token: str) -> OwnerInfo | None:
        """The account whose token this is, or None. Suspended accounts authenticate (they
        may still read); what they may not do, the calls refuse."""
        if not isinstance(token, str) or not token:
            return None
        try:
            digest = hash_token(token)
        except UnicodeEncodeError:
            return None
        with self._transaction(write=False) as session:
            owner = session.scalars(select(Owner).where(Owner.token_hash == digest)
                                    ).one_or_none()
            if owner is None or not hmac.compare_digest(owner.token_hash, digest):
                return None
            return owner_info(owner)

    def suspend_owner(self, name: str, reason: str) -> OwnerInfo:
        """Suspends an account (the admin's): its bots stop being scheduled, the reason shows
        on their profiles, and it can change nothing until reinstated."""
        check_reason(reason)
        with self._transaction(write=True) as session:
            owner = owner_by_name(session, name, lock=True)
            owner.suspended_reason = reason
            return owner_info(owner)

    def reinstate_owner(self, name: str) -> OwnerInfo:
        with self._transaction(write=True) as session:
            owner = owner_by_name(session, name, lock=True)
            owner.suspended_reason = None
            return owner_info(owner)

    def get_owner(self, name: str) -> OwnerProfile:
        with self._transaction(write=False) as session:
            owner = owner_by_name(session, name)
            bots = session.scalars(select(Bot).where(Bot.owner_id == owner.id)
                                   .order_by(Bot.name))
            return OwnerProfile(owner_info(owner), tuple(bot_info(bot) for bot in bots))

    def list_owners(self) -> list[OwnerInfo]:
        with self._transaction(write=False) as session:
            return [owner_info(o) for o in session.scalars(select(Owner).order_by(Owner.name))]

    def register_owned_bot(self, name: str, *, owner: str,
                           kind: BotKind) -> tuple[BotInfo, str | None]:
        """An owner registers a bot. Remote: its token comes back (shown once); registering
        one's own remote bot again makes a new version with a new token, as the admin's
        ``register_bot`` does. Hosted: no token (nobody connects as it; the ladder runs its
        uploads), and its first upload makes version 1."""
        check_bot_name(name)
        kind = BotKind(kind)
        token = new_token()
        now = self._now()
        try:
            with self._transaction(write=True) as session:
                account = acting_owner(session, owner, write=True)
                assert account is not None
                bot = session.scalars(select(Bot).where(Bot.name == name).with_for_update()
                                      ).one_or_none()
                if bot is not None and bot.owner_id != account.id:
                    raise BotOwnerError(f"the name {name} is taken by another owner")
                if bot is None or bot.retired:
                    check_bot_room(session, account, self.limits.bots_per_owner)
                if bot is None:
                    bot = Bot(name=name, owner=account.name, owner_id=account.id, account=account,
                              version=0, token_hash=hash_token(token), retired=False,
                              created_at=now, kind=kind)
                    session.add(bot)
                    session.flush()
                elif bot.kind != kind:
                    raise BotKindError(f"{name} is a {bot.kind} bot, not a {kind} one")
                if kind == BotKind.HOSTED:
                    bot.retired = False
                    return bot_info(bot), None
                new_remote_version(session, bot, hash_token(token), now)
                session.flush()
                return bot_info(bot), token
        except IntegrityError:
            raise BotOwnerError(f"the name {name} was just taken") from None

    def rotate_bot_token(self, name: str, *, as_owner: str | None) -> tuple[BotInfo, str]:
        """A new token for a remote bot (the old one stops working at once); same version."""
        token = new_token()
        with self._transaction(write=True) as session:
            bot = owned_bot(session, name, as_owner, write=True)
            if bot.kind != BotKind.REMOTE:
                raise BotKindError(f"{name} is a hosted bot: it has no token to rotate (the "
                                   "ladder runs it)")
            bot.token_hash = hash_token(token)
            return bot_info(bot), token

    def retire_owned_bot(self, name: str, *, as_owner: str | None) -> BotInfo:
        """Retires a bot its owner (or the admin) names; see ``retire_bot``."""
        with self._transaction(write=True) as session:
            bot = owned_bot(session, name, as_owner, write=True)
            bot.retired = True
            return bot_info(bot)
