"""Ratings: the current ones, the leaderboard they make, their history, their wholesale
replacement by a recompute, and the bot profile that shows them.

The live update of a rating (:func:`rate_match`) is part of finishing a match
(:mod:`.matches`), in the same transaction as its result. The leaderboard
sorts by :func:`scout_arena.ratings.conservative`, so that it agrees with every other standings
table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from scout_arena.ratings import conservative
from sqlalchemy import case, delete, func, insert, select
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.orm import Session

from scout_ladder.models import Bot, Match, MatchSeat, Rating, RatingHistory

from .bots import versions_of
from .common import FETCH_BATCH, bot_by_name, bot_info, check_rating, is_bot_name
from .database import Database
from .errors import InvalidInputError, UnknownBotError
from .match_history import finished_batch, recent_matches
from .results import (
    BotProfile,
    FinishedMatch,
    LeaderboardRow,
    RatingHistoryEntry,
    RatingInfo,
    RatingPoint,
    RatingSnapshot,
    TableSizeRecord,
)

RECENT_FORM_LENGTH = 5
"""How many of a bot's latest rated ranks the leaderboard shows."""


def rating_info(rating: Rating, name: str) -> RatingInfo:
    return RatingInfo(name, rating.mu, rating.sigma, rating.games, rating.updated_at)


def rate_match(session: Session, backend: str, match_id: str, bot_ids: Mapping[str, int],
               rating_updates: Mapping[str, tuple[float, float]], now: datetime) -> None:
    """Store the ``(mu, sigma)`` a finished match gave each rated bot of ``bot_ids`` (its
    seats' bots by name), one history row each, in the caller's transaction. Rows are updated
    in bot-name order, so concurrent finishes sharing bots cannot deadlock on PostgreSQL."""
    for bot_name in sorted(rating_updates):
        mu, sigma = rating_updates[bot_name]
        bot_id = bot_ids.get(bot_name)
        if bot_id is None:
            bot_by_name(session, bot_name)  # raises UnknownBotError for a stranger
            raise InvalidInputError(f"{bot_name} did not play {match_id}")
        check_rating(bot_name, mu, sigma)
        session.execute(_upsert_rating(backend, bot_id, mu, sigma, now))
        session.execute(
            insert(RatingHistory).values(
                bot_id=bot_id, match_id=match_id, mu=mu, sigma=sigma, created_at=now
            )
        )


def _upsert_rating(
    backend: str, bot_id: int, mu: float, sigma: float, now: datetime
) -> pg_dialect.Insert | sqlite_dialect.Insert:
    """INSERT ... ON CONFLICT: atomic even when two finishes create a bot's first rating."""
    values = {"bot_id": bot_id, "mu": mu, "sigma": sigma, "games": 1, "updated_at": now}
    insert = pg_dialect.insert if backend == "postgresql" else sqlite_dialect.insert
    statement = insert(Rating).values(values)
    return statement.on_conflict_do_update(
        index_elements=[Rating.bot_id],
        set_={
            "mu": statement.excluded.mu,
            "sigma": statement.excluded.sigma,
            "games": Rating.games + 1,
            "updated_at": statement.excluded.updated_at,
        },
    )


def leaderboard_rows(session: Session) -> list[LeaderboardRow]:
    rows = session.execute(
        select(Rating, Bot).join(Bot, Bot.id == Rating.bot_id).where(Bot.retired.is_(False))
    )
    standings = sorted(
        rows, key=lambda row: (-conservative(row[0].mu, row[0].sigma), row[1].name)
    )
    position = (
        func.row_number()
        .over(
            partition_by=MatchSeat.bot_id,
            order_by=(Match.finished_at.desc(), Match.id.desc()),
        )
        .label("position")
    )
    latest = (
        select(MatchSeat.bot_id, MatchSeat.rank, Match.table_size, position)
        .join(Match, Match.id == MatchSeat.match_id)
        .where(Match.status == "finished", Match.rated.is_(True))
        .subquery()
    )
    form: dict[int, list[int]] = defaultdict(list)
    sizes: dict[int, list[int]] = defaultdict(list)
    for bot_id, rank, size in session.execute(
        select(latest.c.bot_id, latest.c.rank, latest.c.table_size)
        .where(latest.c.position <= RECENT_FORM_LENGTH)
        .order_by(latest.c.bot_id, latest.c.position)
    ):
        form[bot_id].append(rank)
        sizes[bot_id].append(size)
    return [
        LeaderboardRow(
            rank=index,
            bot=bot.name,
            owner=bot.owner,
            mu=rating.mu,
            sigma=rating.sigma,
            conservative=conservative(rating.mu, rating.sigma),
            games=rating.games,
            recent_ranks=tuple(form[bot.id]),
            recent_table_sizes=tuple(sizes[bot.id]),
            on_probation=bot.probation_reason is not None,
        )
        for index, (rating, bot) in enumerate(standings, start=1)
    ]


class RatingStore(Database):
    """The rating queries of :class:`~scout_ladder.repository.Repository`."""

    def ratings(self) -> dict[str, RatingInfo]:
        """Every bot's current rating, retired bots included; a bot that never played a rated
        match has none (the ratings module starts it at the TrueSkill default)."""
        with self._transaction(write=False) as session:
            rows = session.execute(select(Rating, Bot.name).join(Bot, Bot.id == Rating.bot_id))
            return {name: rating_info(rating, name) for rating, name in rows}

    def rating_snapshot(self, batch_size: int = FETCH_BATCH) -> RatingSnapshot:
        """Every finished rated match, in the order they finished, and every stored rating,
        read in ONE transaction: what a recompute compares. Read apart, a match finishing in
        between shows up in the ratings and not in the history, and a live ladder seems to
        disagree with itself. PostgreSQL reads it at REPEATABLE READ; SQLite's one read
        transaction sees one WAL snapshot; neither blocks the ladder's writes."""
        with self._transaction(write=False) as session:
            rows = session.execute(select(Rating, Bot.name).join(Bot, Bot.id == Rating.bot_id))
            ratings = {name: rating_info(rating, name) for rating, name in rows}
            matches: list[FinishedMatch] = []
            after = None
            while True:
                batch = finished_batch(session, after, True, batch_size)
                matches.extend(batch)
                if len(batch) < batch_size:
                    break
                after = (batch[-1].finished_at, batch[-1].match_id)
            return RatingSnapshot(matches=tuple(matches), ratings=ratings)

    def leaderboard(self) -> list[LeaderboardRow]:
        """Rated, unretired bots by mu - 3 sigma, best first (ties by name)."""
        with self._transaction(write=False) as session:
            return leaderboard_rows(session)

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
            check_rating(name, mu, sigma)
        for entry in entries:
            check_rating(entry.bot, entry.mu, entry.sigma)
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
            for start in range(0, len(entries), FETCH_BATCH):
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
                        for entry in entries[start : start + FETCH_BATCH]
                    ],
                )

    def bot_profile(self, name: str, recent: int = 10) -> BotProfile | None:
        """Everything a bot's page shows, read in one transaction; None for an unknown name,
        like the other lookups."""
        if not is_bot_name(name):
            return None
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
                (row.rank for row in leaderboard_rows(session) if row.bot == name), None
            )
            return BotProfile(
                bot=bot_info(bot),
                rating=None if rating is None else rating_info(rating, name),
                leaderboard_rank=leaderboard_rank,
                versions=tuple(versions_of(session, bot.id)),
                history=points,
                by_table_size=by_size,
                matches_finished=sum(record.matches for record in by_size),
                timeouts=sum(int(row[5]) for row in per_size),
                forfeits=sum(int(row[6]) for row in per_size),
                illegal_actions=sum(int(row[7]) for row in per_size),
                recent_matches=tuple(recent_matches(session, bot.id, recent)),
            )
