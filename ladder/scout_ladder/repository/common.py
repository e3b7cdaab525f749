"""Checks, lookups and row conversions that more than one kind of query needs.

Internal to the repository package: every function takes the caller's session, so that it runs
inside the caller's one transaction.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence

from scout_arena.text import echo
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from scout_ladder.models import (
    MATCH_ID_LENGTH,
    NAME_LENGTH,
    OWNER_LENGTH,
    Bot,
    BotVersion,
    Match,
    MatchSeat,
)

from .errors import InvalidInputError, UnknownBotError
from .results import BotInfo, BotVersionInfo, MatchSummary, SeatSummary, VersionStatus

FETCH_BATCH = 500
"""Rows per IN (...) list, bulk statement or batch of a long read."""

_BOT_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{NAME_LENGTH - 1}}}")


def is_bot_name(name: object) -> bool:
    """Whether ``name`` could name a bot at all: lookups of anything else find nothing without
    asking the database (PostgreSQL refuses a NUL in a text parameter outright)."""
    return isinstance(name, str) and _BOT_NAME.fullmatch(name) is not None


def is_match_id(match_id: object) -> bool:
    """Whether ``match_id`` could be a stored match id (lookups of anything else find none)."""
    return (isinstance(match_id, str) and 0 < len(match_id) <= MATCH_ID_LENGTH
            and "\x00" not in match_id)


def check_bot_name(name: str) -> None:
    if not is_bot_name(name):
        raise InvalidInputError(
            f"a bot name is 1-{NAME_LENGTH} letters, digits, '_', '.' or '-', starting with a "
            f"letter or digit; got {echo(name)}"
        )


def _owner_problem(owner: str) -> str | None:
    if not owner or len(owner) > OWNER_LENGTH:
        return f"is 1-{OWNER_LENGTH} characters"
    if owner != owner.strip():
        return "has no leading or trailing white space"
    for char in owner:
        # Cc control (newline, NUL, ESC...), Cf format (bidi overrides, zero width), Cs, Co,
        # Cn; Zl/Zp line and paragraph separators: nothing a terminal or a page shows plainly.
        if unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp"):
            return f"has no control or invisible characters (found U+{ord(char):04X})"
    return None


def check_owner(owner: str) -> None:
    """Owners are free text (``Alice Smith`` is fine) but printable: 1-128 characters, no
    control, format or line-separator characters, no white space around. Refused like a bad
    bot name, with the value echoed only in part."""
    problem = "is a string" if not isinstance(owner, str) else _owner_problem(owner)
    if problem is not None:
        raise InvalidInputError(f"an owner {problem}; got {echo(owner)}")


def check_rating(bot: str, mu: float, sigma: float) -> None:
    if not (math.isfinite(mu) and math.isfinite(sigma) and sigma > 0):
        raise InvalidInputError(f"rating of {bot} must be finite with sigma > 0: {mu}, {sigma}")


def bot_info(bot: Bot) -> BotInfo:
    return BotInfo(
        name=bot.name,
        owner=bot.owner,
        version=bot.version,
        retired=bot.retired,
        created_at=bot.created_at,
        probation_reason=bot.probation_reason,
        probation_since=bot.probation_since,
        kind=bot.kind,
        paused_reason=bot.paused_reason,
        suspended_reason=None if bot.account is None else bot.account.suspended_reason,
    )


def version_info(row: BotVersion, bot: str = "") -> BotVersionInfo:
    command: tuple[str, ...] = ()
    if row.command_json is not None:
        command = tuple(str(part) for part in json.loads(row.command_json))
    return BotVersionInfo(
        version=row.version,
        registered_at=row.registered_at,
        status=VersionStatus(row.status),
        reason=row.reason,
        validation_output=row.validation_output,
        archive_sha256=row.archive_sha256,
        archive_size=row.archive_size,
        runtime=row.runtime,
        command=command,
        decided_at=row.decided_at,
        bot=bot,
    )


def next_version(session: Session, bot_id: int) -> int:
    """The number of a bot's next version: one past every version it ever had (a rejected
    upload keeps its number, so numbers never repeat)."""
    highest = session.scalar(select(func.max(BotVersion.version))
                             .where(BotVersion.bot_id == bot_id))
    return (highest or 0) + 1


def supersede_active(session: Session, bot_id: int) -> None:
    for row in session.scalars(select(BotVersion).where(
            BotVersion.bot_id == bot_id, BotVersion.status == VersionStatus.ACTIVE)):
        row.status = VersionStatus.SUPERSEDED


def bot_by_name(session: Session, name: str, *, lock: bool = False) -> Bot:
    if not is_bot_name(name):
        raise UnknownBotError(name)  # no bot can have it: no need to ask the database
    query = select(Bot).where(Bot.name == name)
    if lock:
        query = query.with_for_update()
    bot = session.scalars(query).one_or_none()
    if bot is None:
        raise UnknownBotError(name)
    return bot


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


def match_summaries(session: Session, matches: Sequence[Match]) -> list[MatchSummary]:
    seats: dict[str, list[SeatSummary]] = defaultdict(list)
    ids = [match.id for match in matches]
    for start in range(0, len(ids), FETCH_BATCH):
        rows = session.execute(
            select(MatchSeat, Bot.name)
            .join(Bot, Bot.id == MatchSeat.bot_id)
            .where(MatchSeat.match_id.in_(ids[start : start + FETCH_BATCH]))
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
