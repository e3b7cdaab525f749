"""One match as the referee runs it: its start, its strikes and forfeits, its record, its end.

A match's turns run as its answers come: the task that read an answer off a bot's stream
routes it to its seat, and the turn (judge the answer, play the move, send the next request)
runs right there when the event loop's pass has room for it (`TurnGate`), with no task of
the match to wake. A seat's timer runs its turn when its time could be up. The match's own
task only waits for each phase to end and writes the record. Nothing in a turn waits, so a
slow, silent or hostile bot only ever costs its own seat time. The game itself (phases, moves,
the fallback) is `MatchPlay`'s; the requests and their answers are `Asking`'s.

What happens is told as `events`: the match's `MatchWire` serializes each one (a broadcast
once for the whole table) and the seats' connections carry the bytes; spectators get the same
events from `watch`. Nothing here knows what a message looks like on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Protocol

from scout_rules import State, rank_scores, spectator_view
from scout_rules.protocol import TimeControl

from ..record import JSON, MatchRecord, Note, RecordStatus, RefereeMeta, SeatStats, build_record
from .asking import Asking
from .clock import SeatClock
from .connections import BotEntry
from .events import (
    MatchEnded,
    MatchEndStatus,
    MatchSnapshot,
    MatchStatus,
    MatchWire,
    SpectatorEvent,
)
from .metrics import RefereeMetrics
from .play import MatchPlay, stop_asking
from .seat import FORFEIT, Seat
from .spectators import Spectators
from .table import Table
from .turns import TurnGate

log = logging.getLogger("scout_arena.referee")

STORE_AFTER_CANCEL_S = 10.0
"""How long a match cancelled while writing its record still waits for the write."""

ABORT_REASON = "the referee stopped before the match ended"
"""Why a match stopped without a result, unless whoever stopped it said more."""

RECORD_STATUS = {MatchStatus.FINISHED: RecordStatus.FINISHED,
                 MatchStatus.ABORTED: RecordStatus.ABORTED}
"""How a match that has ended stands in its record."""


async def _through_cancellation(store: Awaitable[None]) -> tuple[asyncio.Future[None], bool]:
    """Run ``store`` to its end even if the caller is cancelled meanwhile: a match that is over
    stays over, so one cancelled while its record is being written (a shutdown, a stopped
    tournament) ends as it was once the record is on disk, for up to STORE_AFTER_CANCEL_S
    more. Returns the store's future (not done if that ran out) and whether a cancellation
    came, which the caller raises once the match has ended."""
    stored = asyncio.ensure_future(store)
    cancelled = False
    while not stored.done():
        try:
            await asyncio.wait((stored,), timeout=STORE_AFTER_CANCEL_S if cancelled else None)
        except asyncio.CancelledError:
            cancelled = True
            continue
        if cancelled:
            break
    return stored, cancelled


class MatchHost(Protocol):
    """What a match needs of the referee that runs it."""

    max_strikes: int
    metrics: RefereeMetrics
    turns: TurnGate

    async def store_record(self, match: MatchRunner) -> None: ...

    def match_finished(self, match: MatchRunner) -> None: ...


class MatchRunner:
    """Plays one match: asks each seat in turn, enforces the clock, records everything."""

    def __init__(self, host: MatchHost, match_id: str, bots: Sequence[BotEntry], seed: int,
                 time_control: TimeControl, wire: MatchWire, meta: JSON | None = None) -> None:
        self.host = host
        self.metrics = host.metrics
        self.match_id = match_id
        self.seed = seed
        self.time_control = time_control
        self.wire = wire
        self.state = State.new(len(bots), seed)
        self.seats = [Seat(self, i, bot, SeatClock(time_control.decision_ms,
                                                   float(time_control.time_bank_ms)))
                      for i, bot in enumerate(bots)]
        self.names = tuple(bot.name for bot in bots)
        self.versions = [bot.connection.version if bot.connection else "" for bot in bots]
        self.status = MatchStatus.RUNNING
        self.notes: list[Note] = []
        self.record: MatchRecord | None = None
        self.spectators = Spectators()
        self.table = Table(match_id, self.seats, wire, self.names, self.state.num_rounds,
                           time_control)
        """What the match says to its seats (`table`)."""
        self.asking = Asking(self, self.table, time_control, wire, host.metrics)
        """Its requests to the seats and their answers (`asking`)."""
        self.play = MatchPlay(match_id, self.state, self.seats, self.table, self.asking,
                              self.spectators)
        """The game itself: its phases and moves (`play`)."""
        self.created_at = time.time()
        self.task: asyncio.Task[None] | None = None
        self.extra_meta: JSON = dict(meta or {})
        self._finishing = False
        self._begun = False
        self._abort_at_start = False
        self.stopped_as = (MatchEndStatus.ABORTED, ABORT_REASON)
        """How the seats are told the match ended when it is stopped before its end."""
        self.record_stored = True
        """False once writing the record failed (it is then kept in memory, `MatchBook`)."""

    # ----- public views -----------------------------------------------------------------

    @property
    def forfeited(self) -> list[int]:
        return [s.index for s in self.seats if s.forfeited]

    def snapshot(self) -> MatchSnapshot:
        view = spectator_view(self.state)
        forfeited = tuple(self.forfeited)
        ranks = rank_scores(view.scores, forfeited) if self.status is MatchStatus.FINISHED \
            else ()
        return MatchSnapshot(self.match_id, self.status, self.names, self.seed,
                             self.time_control, view.round_index, view.scores, forfeited, ranks)

    async def watch(self) -> AsyncIterator[SpectatorEvent]:
        """Every public event from the start, then live ones until the match ends."""
        yield self.snapshot()
        async for event in self.spectators.follow():
            yield event

    def note(self, kind: str, seat: int, detail: str) -> None:
        state = self.state
        self.notes.append(Note(kind, seat, state.round_index,
                               len(state.round_logs[-1].actions), detail))

    # ----- strikes and forfeits -----------------------------------------------------------

    def strike(self, seat: Seat, kind: str, detail: str) -> None:
        """A strike for ``kind`` (timeout, illegal_action, malformed_action): the note of
        what happened, then a ``strike`` note with the count (docs/record-format.md)."""
        seat.strikes += 1
        self.note(kind, seat.index, detail)
        self.note("strike", seat.index,
                  f"strike {seat.strikes} of {self.host.max_strikes} ({kind})")
        if seat.strikes >= self.host.max_strikes and not seat.forfeited:
            self.forfeit(seat, f"{seat.strikes} strikes")

    def forfeit(self, seat: Seat, reason: str) -> None:
        if seat.forfeited or self.status is not MatchStatus.RUNNING:
            return
        seat.forfeited = True
        self.metrics.forfeits.inc()
        self.note("forfeit", seat.index, reason)
        log.info("match %s: seat %d (%s) forfeits: %s", self.match_id, seat.index,
                 seat.bot.name, reason)
        if seat.open is not None:
            seat.deliver(FORFEIT)

    # ----- the match loop -----------------------------------------------------------------

    def cancel(self, reason: str = ABORT_REASON,
               status: MatchEndStatus = MatchEndStatus.ABORTED) -> bool:
        """Stop the match without a result: it is aborted and its record written; its seats
        get a MatchEnded with ``status`` and ``reason``. A task
        cancelled before its first step never runs its body (no record, its seats and its
        place in the referee held for ever), so a match whose task has not begun yet is
        told to abort as it begins. False when it has ended already."""
        task = self.task
        if task is None or task.done():
            return False
        self.stopped_as = (status, reason)
        if self._begun:
            task.cancel()
        else:
            self._abort_at_start = True
        return True

    async def run(self) -> None:
        """The match from start to record. Its turns run outside this task, as answers come
        (`answer_turn`); the task waits for each phase (a round's rotations, its decisions,
        `MatchPlay.phase`) to end, and writes the record. Cancel it with `cancel`, not through
        its task."""
        self._begun = True
        state = self.state
        try:
            if self._abort_at_start:
                raise asyncio.CancelledError
            for seat in self.seats:
                self.table.match_started(seat, resumed=False)
            self.play.round_started()
            while not state.is_over:
                await self.play.phase()
            await self._finish(MatchStatus.FINISHED)
        except asyncio.CancelledError:
            stop_asking(self.seats)
            await asyncio.shield(self._finish(MatchStatus.ABORTED))
            raise
        except Exception:
            log.exception("match %s crashed", self.match_id)
            self.stopped_as = (MatchEndStatus.ABORTED, "the referee failed while playing it "
                               "(a bug; see the referee's log)")
            stop_asking(self.seats)
            await asyncio.shield(self._finish(MatchStatus.ABORTED))

    async def _finish(self, status: MatchStatus) -> None:
        if self._finishing:
            return
        self._finishing = True
        state = self.state
        forfeits = self.forfeited
        self.record = build_record(state, self.names, match_id=self.match_id,
                                   forfeits=forfeits, notes=self.notes,
                                   meta=referee_meta(self, status))
        stored, cancelled = await _through_cancellation(self.host.store_record(self))
        try:
            if not stored.done():
                raise TimeoutError(f"no record written {STORE_AFTER_CANCEL_S:g} s after the "
                                   "match was cancelled")
            stored.result()
        except Exception:
            # The match still ends: its seats are freed, the apps get the record, and it is
            # kept in memory like any finished one. A match left running would hold its bots
            # and its caller for ever, for a full disk or a removed directory.
            self.record_stored = False
            self.metrics.record_write_failures.inc()
            log.exception("match %s: its record could not be written; the match ends all the "
                          "same, its record only in memory (fix the records directory)",
                          self.match_id)
        # The status changes only once the record is stored: FINISHED means it can be read.
        self.status = status
        self.metrics.matches_finished.labels(status.value).inc()
        # Watchers stop on this flag, set just before the last event is published.
        self.spectators.closed = True
        if status is MatchStatus.FINISHED:
            ended = MatchEnded(self.match_id, tuple(state.scores),
                               rank_scores(state.scores, forfeits), tuple(forfeits),
                               record_id=self.match_id)
            self.table.broadcast(ended)
            self.spectators.publish(ended)
        else:
            end_status, reason = self.stopped_as
            self.table.broadcast(MatchEnded(self.match_id, status=end_status, reason=reason))
            self.spectators.publish(self.snapshot())
        for seat in self.seats:
            seat.bot.seats.pop(self.match_id, None)
            seat.stop_timer()
        self.host.match_finished(self)
        # Each seat refers to this runner and the runner to its seats. No bot holds a seat here
        # any more, so break that cycle: the runner (state, spectator log: ~1,200 objects) is
        # then freed by reference counting as soon as the referee lets it go, instead of waiting
        # for a full garbage collection (which stalls the event loop ~1 s at 10,000 bots).
        for seat in self.seats:
            del seat.match
        del self.asking, self.play  # which refer to this runner too
        if cancelled:
            raise asyncio.CancelledError


def referee_meta(match: MatchRunner, status: MatchStatus) -> RefereeMeta:
    """The referee's bookkeeping of ``match``, ended with ``status``, for its record."""
    tc = match.time_control
    return RefereeMeta(
        status=RECORD_STATUS[status], decision_ms=tc.decision_ms,
        time_bank_ms=tc.time_bank_ms, bot_versions=tuple(match.versions),
        created_at=match.created_at, ended_at=time.time(),
        seats=tuple(SeatStats(strikes=s.strikes, timeouts=s.timeouts,
                              illegal_actions=s.illegal, forfeited=s.forfeited,
                              time_bank_ms=int(s.clock.bank_ms),
                              referee_ms=int(s.clock.referee_ms)) for s in match.seats),
        extra=match.extra_meta)
