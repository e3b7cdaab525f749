"""The life of a ladder match, from its row to its rating, and why nothing finished is lost.

1. **Intent first.** The in-flight row is committed, under the id the match keeps from start to
   end, *before* the referee is asked for the match, so no match can end before its row
   exists. If the referee then refuses (a bot left meanwhile), the row is voided with that
   reason.
2. **Start.** The referee (the ladder's own, a node, a hosting node) plays the match under that
   same id: an id copied from the match list while it is in flight is the one its live view,
   its record and its result have.
3. **Settle.** A finished match is stored with its ratings, an aborted one voided with a true
   reason. Every such write is idempotent in the repository and retried (`DatabaseCalls`),
   with backoff, for as long as the database fails for a transient reason; any other failure
   is logged and the match voided saying so. No task's exception goes unlogged.
4. **Stop.** A clean stop stops scheduling, lets the referee abort what is running (each abort
   voids its row: "the ladder was stopped"), waits for every pending write, and only then
   releases the lease. So only a crash or a kill leaves rows in flight for the next start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import secrets
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scout_arena.record import MatchRecord, record_to_json
from scout_arena.server import RefereeFacade
from scout_arena.text import brief

from .probation import Probation
from .ratingcache import RatingsCache, RatingUpdates
from .repository import Repository, SeatResult, StorageError
from .roster import Roster
from .runtime import Background, DatabaseCalls, RunFlags

log = logging.getLogger("scout_ladder")

VOID_AT_START = "the ladder died (it was killed or crashed) before the match ended"
VOID_AT_STOP = "the ladder was stopped"
VOID_BEFORE_START = "the ladder was stopped before the match began"


@dataclass(eq=False)
class Flight:
    """A match this process started and has not settled yet."""

    intent_id: str
    """The id its row was written under before the referee started it."""
    match_id: str
    """The referee's id for it: the same as ``intent_id`` (kept apart for the callers that
    build a flight by position)."""
    challenge_id: int | None
    players: tuple[str, ...] = ()
    node: str | None = None
    """Address of the referee node hosting it; None: the ladder's own referee."""
    node_tls: bool = False
    tickets: dict[str, str] = field(default_factory=dict)
    """Bot -> its ticket to the node, for the bots told where to play it: sent again after
    each Welcome of the bot (PROTOCOL.md §3.8), so that a restarted bot resumes the match."""


def new_intent_id() -> str:
    return f"m-{secrets.token_hex(8)}"


def seat_results(record: MatchRecord) -> list[SeatResult]:
    """Each seat's result of a finished match, as the repository stores it."""
    outcome = record.outcome
    assert outcome is not None
    return [SeatResult(seat=i, bot=name, score=outcome.totals[i], rank=outcome.ranks[i],
                       forfeited=i in outcome.forfeits, timeouts=outcome.seats[i].timeouts,
                       illegal_actions=outcome.seats[i].illegal_actions)
            for i, name in enumerate(outcome.players)]


class MatchFlights:
    """The matches in flight: their intent, bind and settle steps (the module docstring)."""

    def __init__(self, repo: Repository, referee: RefereeFacade, rng: random.Random,
                 flags: RunFlags, background: Background, ratings: RatingsCache,
                 roster: Roster, probation: Probation) -> None:
        self.repo = repo
        self.referee = referee
        self.rng = rng
        self.flags = flags
        self.background = background
        self.db = DatabaseCalls(flags)
        self.ratings = ratings
        self.roster = roster
        self.probation = probation
        self.flights: dict[str, Flight] = {}
        """Referee match id -> its flight."""
        self.unsettled_intents: set[str] = set()
        """Rows that may have been written and are not settled: voided at stop."""
        self.settled: Counter[str] = Counter()
        """Matches settled by this process, "finished" or "void" (the status line's counts)."""

    # ----- intent and bind ------------------------------------------------------------------

    async def write_intent(self, intent_id: str, names: list[str],
                           challenge_id: int | None) -> int | None:
        """Commit the match's row before it can start (step 1): its seed, or None when the
        repository refused it (a bot was retired meanwhile) or the ladder stopped during the
        write. Seats are shuffled here."""
        self.rng.shuffle(names)
        seed = self.rng.getrandbits(64)
        seats = [(n, self.roster.versions.get(n, 1)) for n in names]
        try:
            await self.db.run_unless_stopping(
                f"write match {intent_id} before it starts", self.repo.start_match,
                intent_id, len(names), seed, seats, challenge_id is None, challenge_id)
        except StorageError as exc:  # refused: a bot was retired meanwhile, ...
            log.warning("not starting a match of %s: %s", ", ".join(names), exc)
            return None
        except BaseException:
            # The row may have been written (the answer to its commit was lost): ours to void.
            self.unsettled_intents.add(intent_id)
            if self.flags.stopping:
                return None
            raise
        return seed

    async def start_here(self, names: list[str], challenge_id: int | None) -> None:
        """Writes the match, then has the ladder's own referee start it."""
        intent_id = new_intent_id()
        seed = await self.write_intent(intent_id, names, challenge_id)
        if seed is None:
            return
        if self.flags.stopping:
            await self.void_intent(intent_id, VOID_BEFORE_START)
            return
        try:
            match_id = self.referee.create_match(names, seed, match_id=intent_id)
        except Exception as exc:  # MatchRequestError: a bot left or filled up meanwhile
            log.info("the referee did not start match %s of %s: %s", intent_id,
                     ", ".join(names), exc)
            await self.void_intent(intent_id, f"the referee did not start it: {brief(exc)}")
            return
        # Synchronously after create_match: the match cannot have ended yet.
        self.flights[match_id] = Flight(intent_id, match_id, challenge_id)
        self.roster.seated(names)

    async def void_intent(self, intent_id: str, reason: str) -> None:
        self.unsettled_intents.add(intent_id)
        await self.db.run(f"void match {intent_id}", self.repo.void_match, intent_id, reason)
        self.unsettled_intents.discard(intent_id)
        self.settled["void"] += 1

    # ----- settle ---------------------------------------------------------------------------

    def match_finished(self, record: MatchRecord) -> None:
        """The ladder's own referee ended a match: store or void it, in a task."""
        self.roster.freed(record.players, time.monotonic())
        flight = self.flights.get(record.match_id or "")
        if flight is None:
            log.error("the referee reported match %s, which this ladder did not start",
                      record.match_id)
            return
        if record.status == "finished" and record.outcome is not None:
            self.background.spawn(self.record_result(flight, record),
                                  f"store the result of match {flight.match_id}")
        else:
            reason = VOID_AT_STOP if self.flags.stopping else \
                "the referee aborted it before it ended (see the ladder's log)"
            self.background.spawn(self.settle_void(flight, reason),
                                  f"void match {flight.match_id}")

    def tell_voided(self, match_id: str, players: Sequence[str], reason: str) -> None:
        """A match on a node is voided: each of its bots hears it on its stream here
        (MatchEnded VOIDED), since the node that would have said so may be gone."""
        for name in players:
            self.referee.send_voided(name, match_id, reason)

    def resend_assignments(self, name: str, match_ids: Iterable[str]) -> None:
        """After a Welcome of ``name``: where each of its matches on nodes (``match_ids``)
        that is still running is played, with its ticket, so that a bot that restarted
        resumes them there."""
        for match_id in sorted(match_ids):
            flight = self.flights.get(match_id)
            ticket = None if flight is None else flight.tickets.get(name)
            if flight is not None and flight.node is not None and ticket is not None:
                self.referee.send_assignment(name, flight.match_id, flight.node, ticket,
                                             flight.node_tls)

    async def settle_void(self, flight: Flight, reason: str) -> None:
        if flight.node is not None and self.flights.get(flight.match_id) is flight:
            self.tell_voided(flight.match_id, flight.players, reason)
        row_id = flight.match_id
        await self.db.run(f"void match {row_id}", self.repo.void_match, row_id, reason)
        if self.flights.pop(flight.match_id, None) is not None:
            self.settled["void"] += 1

    async def record_result(self, flight: Flight, record: MatchRecord) -> None:
        """Rate and store a finished match (one at a time, in the order they finish), then
        check the probation of the bots that had a bad seat in it."""
        outcome = record.outcome
        assert outcome is not None
        rated = flight.challenge_id is None
        results = seat_results(record)
        record_json = json.dumps(record_to_json(record))
        row_id = flight.match_id
        async with self.ratings.lock:
            if self.flights.get(flight.match_id) is not flight:
                # Settled while this waited (a node sends its report again once its link is
                # back): rating it again would change nothing stored, but would move the
                # ratings in memory, and every later one, apart from the stored ones.
                await self.keep_late_record(row_id, record)
                return
            updates: RatingUpdates = {}
            if rated:
                updates = self.ratings.rate(record.players, outcome.ranks)
            try:
                summary = await self.db.run(f"store the result of match {row_id}",
                                            self.repo.finish_match, row_id, record_json,
                                            results, updates)
            except Exception as exc:
                # Not transient: it would fail again. Say so in the row, not only in the log.
                log.error("could not store the result of match %s: %s", row_id, brief(exc),
                          exc_info=exc)
                self.flights.pop(flight.match_id, None)
                await self.db.run(f"void match {row_id}", self.repo.void_match, row_id,
                                  f"the ladder could not store its result: {brief(exc)}")
                self.settled["void"] += 1
                return
            self.settled[summary.status] += 1
            if summary.status == "finished":
                self.ratings.apply(updates)
            else:
                log.warning("match %s ended after it was voided (%s): its record is kept, it "
                            "is not rated", row_id, summary.void_reason)
        self.flights.pop(flight.match_id, None)
        for result in results:
            # A clean seat only lowers the bot's bad share: its check can wait for a bad one.
            if not (result.forfeited or result.timeouts):
                continue
            try:
                await self.probation.check(result.bot)
            except Exception as exc:
                log.warning("probation check of %s failed: %s", result.bot, brief(exc))

    async def keep_late_record(self, match_id: str, record: MatchRecord) -> tuple[bool, str]:
        """A finished match the ladder no longer has in flight: stored already (a repeat), or
        voided before its result came (its record is kept, unrated); never rated here."""
        summary = await self.db.run(f"look up match {match_id}", self.repo.get_match, match_id)
        if summary is None:
            log.error("a node reported match %s, which this ladder never wrote", match_id)
            return False, "unknown match"
        if summary.status != "void" or (summary.seats and summary.seats[0].rank is not None):
            return False, f"already {summary.status}"
        results = seat_results(record)
        await self.db.run(f"keep the late record of match {match_id}", self.repo.finish_match,
                          match_id, json.dumps(record_to_json(record)), results, {})
        log.warning("match %s ended after it was voided (%s): its record is kept, it is not "
                    "rated", match_id, summary.void_reason)
        return False, "voided before its result came: kept, not rated"

    async def settle_at_stop(self) -> None:
        """At stop, once the referee stopped: what is left of the ladder's own referee's is
        over, so it is voided now, not at next start (matches on nodes play on; their nodes
        report them to the next start), and so is every unsettled intent."""
        for flight in list(self.flights.values()):
            if flight.node is None:
                await self.settle_void(flight, VOID_AT_STOP)
        for intent_id in sorted(self.unsettled_intents):
            with contextlib.suppress(StorageError):
                await self.db.run(f"void match {intent_id}", self.repo.void_match, intent_id,
                                  VOID_AT_STOP)
        self.unsettled_intents.clear()
