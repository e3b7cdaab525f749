"""The life of a match: written before it is played, then finished (with the ratings it
changes) or voided.

:meth:`MatchStore.finish_match` writes the seats' results, the match record, every rating
update (with its history row) and the challenge's game count in one transaction, so a crash can
never leave a finished match without its rating change or the reverse. Writing a match before it
is played is what lets :meth:`MatchStore.void_in_flight` find the matches a crash interrupted.

Every call that ends a match is idempotent, so a caller that lost the answer to a commit (the
connection dropped as it was sent) simply calls again:

* ``start_match`` again with the same table is a no-op;
* ``finish_match`` again with the same record and results is a no-op that returns the stored
  match (no second rating, history row or challenge game); with a different result it is
  refused (:class:`MatchStateError`);
* ``finish_match`` of a match that was voided keeps the record and the seats' results, but the
  match stays void, unrated and out of every standing: its rating updates are ignored, so a
  result that arrives after its match was written off is never rated, let alone twice. Once
  stored that way, the same call is again a no-op;
* ``void_match`` of a match that has already ended changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scout_ladder.models import (
    SEED_LIMIT,
    Bot,
    BotVersion,
    Challenge,
    Match,
    MatchSeat,
)

from .challenges import count_challenge_game
from .common import FETCH_BATCH, bot_by_name, match_summaries
from .database import Database
from .errors import (
    BotRetiredError,
    DuplicateMatchError,
    InvalidInputError,
    MatchStateError,
    UnknownChallengeError,
    UnknownMatchError,
)
from .ratings import rate_match
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
        :meth:`void_in_flight` find the matches a crash interrupted. Starting the same match
        (same id, table, seed and kind) again while it is in flight is a no-op; any other use of
        a known id raises :class:`DuplicateMatchError`.
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
                existing = session.get(Match, match_id)
                if existing is not None:
                    summary = match_summaries(session, [existing])[0]
                    same = (
                        summary.status == "in_flight"
                        and (summary.table_size, summary.seed, summary.rated)
                        == (table_size, seed, rated)
                        and summary.challenge_id == challenge_id
                        and [(s.bot, s.bot_version) for s in summary.seats] == list(seats)
                    )
                    if same:
                        return summary
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
        """Stores a finished match: every seat's result, the full JSON record, the new
        ``(mu, sigma)`` of each rated bot with one history row each, and one more game of its
        challenge, if it has one, in ONE transaction.

        Any failure (an unknown or unseated bot in ``rating_updates``, a bad rank, a database
        error) rolls all of it back and leaves the match in flight. Rating rows are updated in
        bot-name order, so concurrent finishes sharing bots cannot deadlock on PostgreSQL.

        Idempotent (see the module): the same finish again returns the stored match and
        changes nothing; a finish of a void match keeps the record, stays void and rates
        nothing. The returned status says which happened: "finished" (the updates are stored)
        or "void" (none is).
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
            if rating_updates and not match.rated:
                raise InvalidInputError(f"{match_id} is unrated but got rating updates")
            seated = self._check_results(session, match, results)
            if match.record_json is not None:
                # Finished (or void with its late record) already: the same result again is a
                # caller repeating a commit whose answer it lost.
                same = match.record_json == record_json and all(
                    (seat.score, seat.rank, seat.forfeited, seat.timeouts, seat.illegal_actions)
                    == (r.score, r.rank, r.forfeited, r.timeouts, r.illegal_actions)
                    for number, (seat, _) in seated.items()
                    for r in (results[number],)
                )
                if not same:
                    raise MatchStateError(
                        f"{match_id} is {match.status} already, with a different result"
                    )
                return match_summaries(session, [match])[0]
            if match.status not in ("in_flight", "void"):
                raise MatchStateError(f"{match_id} is {match.status}, not in flight")
            for number, (seat, _) in seated.items():
                result = results[number]
                seat.score = result.score
                seat.rank = result.rank
                seat.forfeited = result.forfeited
                seat.timeouts = result.timeouts
                seat.illegal_actions = result.illegal_actions
            match.finished_at = now
            match.record_json = record_json
            if match.status == "void":
                # Written off before its result came: keep the game, rate nothing.
                session.flush()
                return match_summaries(session, [match])[0]
            match.status = "finished"
            # Written now, not at commit: a failure below must undo real writes, and does.
            session.flush()

            bot_ids = {bot_name: seat.bot_id for seat, bot_name in seated.values()}
            rate_match(session, self._backend, match_id, bot_ids, rating_updates, now)
            if match.challenge_id is not None:
                count_challenge_game(session, match.challenge_id)
            return match_summaries(session, [match])[0]

    @staticmethod
    def _check_results(
        session: Session, match: Match, results: Mapping[int, SeatResult]
    ) -> dict[int, tuple[MatchSeat, str]]:
        """The match's seats by number, once ``results`` is shown to fit them."""
        seated = {
            seat.seat: (seat, bot_name)
            for seat, bot_name in session.execute(
                select(MatchSeat, Bot.name)
                .join(Bot, Bot.id == MatchSeat.bot_id)
                .where(MatchSeat.match_id == match.id)
                .order_by(MatchSeat.seat)
            )
        }
        if set(results) != set(seated):
            raise InvalidInputError(
                f"{match.id} has seats {sorted(seated)}, results for {sorted(results)}"
            )
        for number, (_, bot_name) in sorted(seated.items()):
            result = results[number]
            if result.bot != bot_name:
                raise InvalidInputError(f"seat {number} of {match.id} is {bot_name}")
            if not 1 <= result.rank <= match.table_size:
                raise InvalidInputError(f"rank {result.rank} at a table of {match.table_size}")
            if result.timeouts < 0 or result.illegal_actions < 0:
                raise InvalidInputError("timeouts and illegal actions are counts")
        return seated

    def void_match(self, match_id: str, reason: str) -> bool:
        """Voids one in-flight match (the referee aborted it, or it never began). False if it
        had already ended, so calling it again changes nothing."""
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

        Run at startup, once the lease (:meth:`acquire_lease`) makes this process the only
        ladder on the database: a match in flight then was interrupted by a crash or a kill
        (a clean stop settles its own matches), and will never report a result. Void matches
        are not rated and not counted anywhere.
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
