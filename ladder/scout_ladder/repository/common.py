"""Checks, lookups and row conversions that more than one kind of query needs.

Internal to the repository package: every function takes the caller's session, so that it runs
inside the caller's one transaction.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from scout_ladder.models import NAME_LENGTH, OWNER_LENGTH, Bot, Match, MatchSeat

from .errors import InvalidInputError, UnknownBotError
from .results import BotInfo, MatchSummary, SeatSummary

FETCH_BATCH = 500
"""Rows per IN (...) list, bulk statement or batch of a long read."""

_BOT_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{NAME_LENGTH - 1}}}")


def check_bot_name(name: str) -> None:
    if not isinstance(name, str) or not _BOT_NAME.fullmatch(name):
        raise InvalidInputError(
            f"a bot name is 1-{NAME_LENGTH} letters, digits, '_', '.' or '-', starting with a "
            f"letter or digit; got {name!r}"
        )


def check_owner(owner: str) -> None:
    if not isinstance(owner, str) or not owner.strip() or len(owner) > OWNER_LENGTH:
        raise InvalidInputError(f"an owner is 1-{OWNER_LENGTH} characters; got {owner!r}")


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
    )


def bot_by_name(session: Session, name: str, *, lock: bool = False) -> Bot:
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
