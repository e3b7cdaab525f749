"""Stored matches read back: one, a page of them, a bot's latest, or all finished ones in
the order they finished (what a rating recompute replays).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, Match, MatchSeat

from .common import FETCH_BATCH, bot_by_name, is_bot_name, is_match_id, match_summaries
from .database import Database
from .results import BotResult, FinishedMatch, MatchSummary

MatchPosition = tuple[datetime, str]
"""Where a match stands in the newest-first list: its creation time and its id."""


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
    assert summary.finished_at is not None
    assert all(seat.rank is not None for seat in summary.seats)
    return FinishedMatch(
        match_id=summary.match_id,
        table_size=summary.table_size,
        rated=summary.rated,
        challenge_id=summary.challenge_id,
        finished_at=summary.finished_at,
        seats=summary.seats,
    )


def finished_batch(
    session: Session, after: tuple[datetime, str] | None, rated_only: bool, batch_size: int
) -> list[FinishedMatch]:
    """The next ``batch_size`` finished matches after ``after`` (finished_at, id), in the order
    they finished."""
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
    return [
        _finished_match(summary)
        for summary in match_summaries(session, list(session.scalars(query)))
    ]


def recent_matches(session: Session, bot_id: int, n: int) -> list[MatchSummary]:
    matches = session.scalars(
        select(Match)
        .join(MatchSeat, MatchSeat.match_id == Match.id)
        .where(MatchSeat.bot_id == bot_id, Match.status == "finished")
        .order_by(Match.finished_at.desc(), Match.id.desc())
        .limit(max(n, 0))
    )
    return match_summaries(session, list(matches))


def _recent_results(session: Session, bot_id: int, n: int) -> list[BotResult]:
    rows = session.execute(
        select(Match, MatchSeat)
        .join(MatchSeat, MatchSeat.match_id == Match.id)
        .where(MatchSeat.bot_id == bot_id, Match.status == "finished")
        .order_by(Match.finished_at.desc(), Match.id.desc())
        .limit(max(n, 0))
    )
    return [_bot_result(match, seat) for match, seat in rows]


class MatchHistory(Database):
    """The match-reading queries of :class:`~scout_ladder.repository.Repository`."""

    def get_match(self, match_id: str) -> MatchSummary | None:
        if not is_match_id(match_id):
            return None
        with self._transaction(write=False) as session:
            match = session.get(Match, match_id)
            return None if match is None else match_summaries(session, [match])[0]

    def list_matches(
        self,
        bot: str | None = None,
        table_size: int | None = None,
        limit: int = 50,
        offset: int = 0,
        *,
        status: str | None = None,
        after: MatchPosition | None = None,
    ) -> list[MatchSummary]:
        """Matches newest first, optionally only those ``bot`` sat in, at one table size or in
        one status, and only those listed after ``after`` (a page's last match: the next page
        neither repeats nor skips one when new matches arrive meanwhile). An unknown bot has
        played nothing: the list is empty."""
        query = select(Match)
        if bot is not None:
            if not is_bot_name(bot):
                return []
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
        if after is not None:
            created, match_id = after
            query = query.where(or_(Match.created_at < created,
                                    and_(Match.created_at == created, Match.id < match_id)))
        query = query.order_by(Match.created_at.desc(), Match.id.desc())
        query = query.limit(max(limit, 0)).offset(max(offset, 0))
        with self._transaction(write=False) as session:
            return match_summaries(session, list(session.scalars(query)))

    def in_flight_matches(self) -> list[MatchSummary]:
        """Every match in flight, oldest first: after a restart, a ladder with nodes lets its
        nodes claim these before it voids the rest."""
        with self._transaction(write=False) as session:
            matches = session.scalars(
                select(Match).where(Match.status == "in_flight").order_by(Match.created_at)
            ).all()
            return match_summaries(session, list(matches))

    def get_record(self, match_id: str) -> str | None:
        """The match's JSON record; None if the match is unknown, in flight, or void without
        one (a void match keeps the record of a result that came after it was voided)."""
        if not is_match_id(match_id):
            return None
        with self._transaction(write=False) as session:
            return session.scalar(select(Match.record_json).where(Match.id == match_id))

    def iter_finished_matches(
        self, *, rated_only: bool = True, batch_size: int = FETCH_BATCH
    ) -> Iterator[FinishedMatch]:
        """Finished matches in the order they finished, seats with bot names and ranks: what a
        rating recompute replays. Reads in batches, each its own short transaction, so a long
        read holds no transaction open; a recompute that compares with the stored ratings
        reads both in one snapshot instead (:meth:`~.ratings.RatingStore.rating_snapshot`)."""
        after: tuple[datetime, str] | None = None
        while True:
            with self._transaction(write=False) as session:
                batch = finished_batch(session, after, rated_only, batch_size)
            yield from batch
            if len(batch) < batch_size:
                return
            after = (batch[-1].finished_at, batch[-1].match_id)

    def recent_seat_results(self, bot_name: str, n: int) -> list[BotResult]:
        """The bot's ``n`` latest finished matches, newest first, rated or not: what probation
        looks at (timeouts, forfeits, illegal actions). ``bot_version`` tells the versions
        apart, so a fixed new version need not answer for the old one."""
        with self._transaction(write=False) as session:
            bot = bot_by_name(session, bot_name)
            return _recent_results(session, bot.id, n)

