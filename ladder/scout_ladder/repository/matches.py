"""The life of a match: written before it is played, then finished (with the ratings it
changes) or voided.

:meth:`MatchStore.finish_match` writes the seats' results, the match record and every rating
update (with its history row) in one transaction, so a crash can never leave a finished match
without its rating change or the reverse. Writing a match before it is played is what lets
:meth:`MatchStore.void_in_flight` find the matches a crash interrupted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import IntegrityError

from scout_ladder.models import (
    SEED_LIMIT,
    Bot,
    BotVersion,
    Challenge,
    Match,
    MatchSeat,
    Rating,
    RatingHistory,
)

from .common import FETCH_BATCH, bot_by_name, check_rating, match_summaries
from .database import Database
from .errors import (
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    MatchStateError,
    UnknownChallengeError,
    UnknownMatchError,
)
from .results import MatchSummary, SeatResult


class MatchStore(Database):
    """The match-writing queries of :class:`~scout_ladder.repository.Repository`."""

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
                    bot = bot_by_name(session, name)
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
                return match_summaries(session, [match])[0]
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
                    bot_by_name(session, bot_name)  # raises UnknownBotError for a stranger
                    raise InvalidInputError(f"{bot_name} did not play {match_id}")
                check_rating(bot_name, mu, sigma)
                session.execute(self._upsert_rating(bot_id, mu, sigma, now))
                session.execute(
                    insert(RatingHistory).values(
                        bot_id=bot_id, match_id=match_id, mu=mu, sigma=sigma, created_at=now
                    )
                )
            return match_summaries(session, [match])[0]

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
            for start in range(0, len(ids), FETCH_BATCH):
                session.execute(
                    update(Match)
                    .where(Match.id.in_(ids[start : start + FETCH_BATCH]))
                    .values(status="void", void_reason=reason)
                    .execution_options(synchronize_session=False)
                )
            return ids
