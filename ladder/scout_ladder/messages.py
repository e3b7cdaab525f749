"""The repository's values as the Ladder service's messages (ladder.proto)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from scout.v1 import ladder_pb2

from .repository import BotInfo, BotProfile, LeaderboardRow, MatchPosition, MatchSummary
from .repository.common import is_match_id

PAGE_TOKEN_MAX = 200
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def bot_summary(bot: BotInfo) -> ladder_pb2.BotSummary:
    return ladder_pb2.BotSummary(name=bot.name, owner=bot.owner, version=bot.version,
                                 retired=bot.retired, probation_reason=bot.probation_reason or "",
                                 kind=bot.kind, paused_reason=bot.paused_reason or "",
                                 suspended_reason=bot.suspended_reason or "")


def leaderboard_entry(row: LeaderboardRow) -> ladder_pb2.LeaderboardEntry:
    return ladder_pb2.LeaderboardEntry(
        rank=row.rank, bot=ladder_pb2.BotSummary(name=row.bot, owner=row.owner),
        mu=row.mu, sigma=row.sigma, conservative=row.conservative, games=row.games,
        recent_ranks=list(row.recent_ranks))


def ladder_match(m: MatchSummary) -> ladder_pb2.LadderMatch:
    return ladder_pb2.LadderMatch(
        match_id=m.match_id, status=m.status, table_size=m.table_size, rated=m.rated,
        seats=[ladder_pb2.LadderSeat(seat=s.seat, bot=s.bot, version=s.bot_version,
                                     score=s.score or 0, rank=s.rank or 0,
                                     forfeited=bool(s.forfeited)) for s in m.seats],
        finished_at=m.finished_at.isoformat() if m.finished_at else "",
        void_reason=m.void_reason or "")


def bot_profile(p: BotProfile) -> ladder_pb2.BotProfile:
    return ladder_pb2.BotProfile(
        bot=bot_summary(p.bot),
        history=[ladder_pb2.RatingPoint(match_id=h.match_id, mu=h.mu, sigma=h.sigma)
                 for h in p.history],
        timeouts=p.timeouts, forfeits=p.forfeits,
        recent_matches=[ladder_match(m) for m in p.recent_matches])


def page_token(m: MatchSummary) -> str:
    """The token of the page after ``m`` (opaque to clients: microseconds and match id)."""
    micros = (m.created_at - EPOCH) // MICROSECOND
    return base64.urlsafe_b64encode(f"{micros}/{m.match_id}".encode()).decode().rstrip("=")


def page_position(token: str) -> MatchPosition | None:
    """The position a `page_token` names; None if it is not in the form this ladder gives."""
    if not token or len(token) > PAGE_TOKEN_MAX:
        return None
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except ValueError:  # binascii.Error and UnicodeDecodeError among them
        return None
    micros, _, match_id = text.partition("/")
    if not micros.isdigit() or not is_match_id(match_id):
        return None
    try:
        return EPOCH + int(micros) * MICROSECOND, match_id
    except OverflowError:
        return None
