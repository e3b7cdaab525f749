"""One match as the referee plays it: ask each seat in turn, keep the clock, count strikes.

A match's turns run as its answers come: the task that read an answer off a bot's stream
routes it to its seat, and the turn (judge the answer, play the move, send the next request)
runs right there when the event loop's pass has room for it (`TurnGate`), with no task of
the match to wake. A seat's timer runs its turn when its time could be up. The match's own
task only waits for each phase to end and writes the record. Nothing in a turn waits, so a
slow, silent or hostile bot only ever costs its own seat time.

What happens is told as `events`: the match's `MatchWire` serializes each one (a broadcast
once for the whole table) and the seats' connections carry the bytes; spectators get the same
events from `watch`. Nothing here knows what a message looks like on the wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Generic, NamedTuple, Protocol, TypeVar

from scout_rules import (
    Action,
    End,
    IllegalAction,
    MalformedAction,
    Observation,
    OutOfTurn,
    Phase,
    Scout,
    State,
    rank_scores,
    spectator_view,
)

from ..record import JSON, MatchRecord, Note, RefereeMeta, SeatStats, build_record
from .clock import SeatClock, TimeControl
from .connections import BotEntry, Handoff
from .events import (
    ActionAnswer,
    ActionPlayed,
    Answer,
    AnswerJudged,
    BotEvent,
    DecisionRequested,
    MatchEnded,
    MatchSnapshot,
    MatchStarted,
    MatchStatus,
    MatchWire,
    Request,
    RotationAnswer,
    RotationRequested,
    RoundEnded,
    RoundStarted,
    SpectatorEvent,
    Verdict,
)
from .metrics import RefereeMetrics
from .turns import TurnGate

log = logging.getLogger("scout_arena.referee")

STORE_AFTER_CANCEL_S = 10.0
"""How long a match cancelled while writing its record still waits for the write."""
LATE_TIMER_S = 0.005
"""A timeout timer that fires later than this waits as long again before it times out."""


T = TypeVar("T")


class Delivered(NamedTuple):
    """An answer routed to the seat whose request it names, as it came off the stream."""

    answer: Answer
    received_at: float
    """The monotonic time it was read (its clock stops there: `clock`)."""
    loop_lag: float
    """How far behind the event loop ran as it was read (`looplag`), credited to the bot."""


class Forfeit(Enum):
    """What a seat's answers get when its bot forfeits: no answer will come, the referee plays
    the fallback for the open request."""

    MARKER = "forfeit"


FORFEIT: Final = Forfeit.MARKER


def _rotation_of(answer: Answer) -> bool:
    assert isinstance(answer, RotationAnswer)  # answers reach requests of their kind (route)
    return answer.rotate


class MatchHost(Protocol):
    """What a match needs of the referee that runs it."""

    max_strikes: int
    metrics: RefereeMetrics
    turns: TurnGate

    async def store_record(self, match: MatchRunner) -> None: ...

    def match_finished(self, match: MatchRunner) -> None: ...


class SeatRequest(Protocol):
    """A seat's open request, whatever the value its answer makes (`OpenRequest`)."""

    @property
    def request_id(self) -> int: ...

    @property
    def event(self) -> Request: ...

    @property
    def kind(self) -> str: ...

    def accept(self, answer: Answer) -> None:
        """Keep what ``answer`` makes; raises (the engine's errors) for one that is not
        acceptable."""
        ...

    def close(self) -> None:
        """Hand the match what the accepted answer made, or None when no answer was accepted:
        the referee plays the fallback (timeout, forfeit)."""
        ...


@dataclass(slots=True)
class OpenRequest(Generic[T]):
    """A request a seat has to answer: what makes a value of an answer (``read``, which
    raises for one that is not acceptable) and what the match does with it (``done``, given
    None when the referee plays the fallback)."""

    request_id: int
    event: Request
    read: Callable[[Answer], T]
    done: Callable[[T | None], None]
    value: T | None = None

    @property
    def kind(self) -> str:
        return self.event.kind

    def accept(self, answer: Answer) -> None:
        self.value = self.read(answer)

    def close(self) -> None:
        self.done(self.value)


@dataclass(eq=False)
class Seat:
    """One bot's place in one match, with its clock and strikes. ``match`` is deleted once the
    match has ended (see `MatchRunner._finish`)."""

    match: MatchRunner
    index: int
    bot: BotEntry
    clock: SeatClock
    strikes: int = 0
    forfeited: bool = False
    absent: bool = False
    timeouts: int = 0
    illegal: int = 0
    open: SeatRequest | None = None
    answers: deque[Delivered | Forfeit] = field(default_factory=deque)
    turn_due: bool = False
    """A turn of this seat is waiting in the gate or running: it sees every answer delivered
    meanwhile, so none needs another."""
    grace_until: float = 0.0
    """Set when the timer went off late (see `looplag`); cleared with each answer taken."""
    timer: asyncio.TimerHandle | None = None
    """Wakes the seat's turn by the time its open request could time out."""
    timer_at: float = 0.0
    """When `timer` goes off, in the loop's time."""

    def deliver(self, item: Delivered | Forfeit) -> None:
        """An answer (or the forfeit marker) for the request this seat has open: the seat's
        turn runs as soon as the event loop has room for it (`TurnGate.wake`), at once if it
        has: in the task that read the answer, with no task of the match to wake."""
        self.answers.append(item)
        self._due()

    def _due(self) -> None:
        if self.open is not None and not self.turn_due:
            self.turn_due = True
            self.match.host.turns.wake(self.take_turn)

    def take_turn(self) -> None:
        """Run by the gate, maybe a pass after it was due: by then the match may have ended
        (nothing open, and `match` deleted)."""
        try:
            if self.open is not None:
                self.match.answer_turn(self)
        finally:
            self.turn_due = False

    def time_left(self) -> float:
        """Seconds until the open request times out (0: it has). One whose timer went off
        more than LATE_TIMER_S late gets as long again: the loop ran behind, and answers that
        came in time may not be read yet."""
        now = time.monotonic()
        expires_at = self.clock.expires_at()
        remaining = max(expires_at, self.grace_until) - now
        if remaining <= 0:
            lateness = now - expires_at
            if self.grace_until or lateness <= LATE_TIMER_S:
                return 0.0
            self.grace_until = now + lateness
            remaining = lateness
        return remaining

    def arm_timer(self, remaining: float) -> None:
        """Have the seat's turn run by the time the open request could time out. A timer
        that goes off early (an earlier request's) runs a turn that sets it again. So until
        the hand-off it is set for the earliest moment the request could time out (its clock
        starting now), and the hand-off itself need not wake the turn; and a request that is
        answered in time leaves it armed for the next one, so a decision neither makes nor
        cancels a timer."""
        if not self.clock.started:
            remaining = min(remaining, self.clock.allowed_s())
        loop = asyncio.get_running_loop()
        wake_at = loop.time() + remaining
        if self.timer is None or self.timer_at > wake_at:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = loop.call_at(wake_at, self._timer_went_off)
            self.timer_at = wake_at

    def _timer_went_off(self) -> None:
        self.timer = None
        self._due()

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def handed_off(self, request_id: int) -> None:
        """Request ``request_id`` reached the transport (or has nobody to reach): if it is
        still the open one, its clock starts now."""
        request = self.open
        if request is None or request.request_id != request_id or self.clock.started:
            return
        self.clock.start()

    def send_request(self, message: bytes, request_id: int) -> None:
        """A request, whose clock starts once the stream's writer has handed it to the transport;
        at once when there is no stream to carry it (a disconnected seat's time runs on)."""
        connection = self.bot.connection
        if connection is not None and not self.absent:
            connection.send(Handoff(message, functools.partial(self.handed_off, request_id)))
        else:
            self.handed_off(request_id)

    def send(self, message: bytes) -> None:
        connection = self.bot.connection
        if connection is not None and not self.absent:
            connection.send(message)

    def wants_public_events(self) -> bool:
        """Whether this seat's stream is sent what a lean one goes without (a PublicEvent, an
        AnswerResult{ACCEPTED}: PROTOCOL.md §3.6.1)."""
        connection = self.bot.connection
        return connection is not None and not self.absent and not connection.lean


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
        self.spectator_log: list[SpectatorEvent] = []
        self._changed: asyncio.Event | None = None
        """Set (and dropped) at the next public event; made only while someone watches."""
        self._closed = False  # set with the last spectator event (after the record is stored)
        self._next_request = 0
        self.created_at = time.time()
        self.task: asyncio.Task[None] | None = None
        self.extra_meta: JSON = dict(meta or {})
        self._finishing = False
        self._begun = False
        self._abort_at_start = False
        self._phase: asyncio.Future[list[bool] | None] | None = None
        """What `run` waits for: the end of the rotations or of the decisions in progress."""
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
        sent = 0
        while True:
            changed = self._changed
            if changed is None:
                changed = self._changed = asyncio.Event()
            while sent < len(self.spectator_log):
                yield self.spectator_log[sent]
                sent += 1
            if self._closed:
                return
            await changed.wait()

    def _publish(self, event: SpectatorEvent) -> None:
        self.spectator_log.append(event)
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()

    def note(self, kind: str, seat: int, detail: str) -> None:
        state = self.state
        self.notes.append(Note(kind, seat, state.round_index,
                               len(state.round_logs[-1].actions), detail))

    # ----- messages to seats --------------------------------------------------------------

    def _broadcast(self, event: BotEvent) -> None:
        message = self.wire.encode(event)
        for seat in self.seats:
            seat.send(message)

    def _broadcast_unless_lean(self, event: ActionPlayed) -> None:
        """Serialized once, sent to the seats whose streams are not lean; when every stream
        is lean (the SDK's and every kit's default) only the wire's history keeps it."""
        receivers = [seat for seat in self.seats if seat.wants_public_events()]
        if not receivers:
            self.wire.played(event)
            return
        message = self.wire.encode(event)
        for seat in receivers:
            seat.send(message)

    def _match_started(self, seat: Seat, resumed: bool) -> MatchStarted:
        return MatchStarted(self.match_id, seat.index, self.names, self.state.num_players,
                            self.state.num_rounds, self.time_control, resumed,
                            int(seat.clock.bank_ms), seat.strikes)

    def resync(self, seat: Seat) -> None:
        """After a reconnect: the match's start again, then the open request with its time
        left."""
        seat.send(self.wire.encode(self._match_started(seat, resumed=True)))
        request = seat.open
        if request is None:
            return
        deadline_ms, time_bank_ms = seat.clock.left()
        seat.send_request(self.wire.encode(dataclasses.replace(
            request.event, deadline_ms=deadline_ms, time_bank_ms=time_bank_ms)),
            request.request_id)

    def judge(self, seat: Seat, request_id: int, verdict: Verdict, reason: str = "") -> None:
        if verdict is Verdict.ACCEPTED and not seat.wants_public_events():
            return
        seat.send(self.wire.encode(AnswerJudged(self.match_id, request_id, verdict, reason,
                                                seat.strikes, int(seat.clock.bank_ms))))

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

    # ----- asking for answers -------------------------------------------------------------

    def _ask(self, seat: Seat, event: Callable[[int, int, int], Request],
             read: Callable[[Answer], T], done: Callable[[T | None], None]) -> None:
        """Send one request; ``done`` gets what ``read`` made of an acceptable answer within
        decision time + bank, or None when the referee plays the fallback (timeout, forfeit):
        from `answer_turn`, which runs when an answer comes or the timer goes off."""
        if seat.forfeited:
            done(None)
            return
        self._next_request += 1
        request_id = self._next_request
        request = event(request_id, self.time_control.decision_ms, int(seat.clock.bank_ms))
        message = self.wire.encode(request)
        seat.clock.queue()
        seat.open = OpenRequest(request_id, request, read, done)
        seat.grace_until = 0.0
        seat.send_request(message, request_id)
        seat.arm_timer(max(seat.time_left(), 0.0))

    def answer_turn(self, seat: Seat) -> None:
        """Take the seat's delivered answers until one is acceptable, or time it out if its
        time is spent; else wait on (the timer is set). A turn that raises ends the match
        (`run`)."""
        request = seat.open
        if request is None:
            return
        try:
            answers = seat.answers
            while answers:
                item = answers.popleft()
                seat.grace_until = 0.0
                if item is FORFEIT:
                    self._answered(seat, request)
                    return
                answer, received_at, loop_lag = item
                try:
                    request.accept(answer)
                except (MalformedAction, IllegalAction, OutOfTurn) as exc:
                    malformed = isinstance(exc, MalformedAction)
                    seat.illegal += 1
                    self.strike(seat, "malformed_action" if malformed else "illegal_action",
                                f"request {request.request_id}: {exc}")
                    self.judge(seat, request.request_id,
                               Verdict.MALFORMED if malformed else Verdict.ILLEGAL, str(exc))
                    if seat.forfeited:
                        self._answered(seat, request)
                        return
                    continue
                decision_ms = self.time_control.decision_ms
                taken = seat.clock.answered(received_at, loop_lag)
                self.metrics.answered_request(request.kind, taken, decision_ms / 1000)
                seat.open = None
                self.judge(seat, request.request_id, Verdict.ACCEPTED)
                self._answered(seat, request)
                return
            remaining = seat.time_left()
            if remaining > 0:
                seat.arm_timer(remaining)
                return
            decision_ms = self.time_control.decision_ms
            seat.clock.ran_out()
            seat.timeouts += 1
            self.metrics.time_losses.inc()
            seat.open = None
            self.strike(seat, "timeout", f"no acceptable answer to request "
                        f"{request.request_id} within {decision_ms} ms and the bank")
            self.judge(seat, request.request_id, Verdict.TIMED_OUT,
                       "time ran out (decision time and bank); the referee played the "
                       "fallback")
            self._answered(seat, request)
        except Exception as exc:  # the match ends on it (`run` logs it)
            self._crash(exc)

    def _answered(self, seat: Seat, request: SeatRequest) -> None:
        seat.open = None
        seat.answers.clear()
        request.close()

    def _stop_asking(self) -> None:
        """The match is ending: no open request is answered any more."""
        for seat in self.seats:
            seat.open = None
            seat.answers.clear()

    def _crash(self, exc: Exception) -> None:
        """A turn raised: `run` ends the match (ABORTED) with the traceback in the log. The
        turn ran in some other task (the one that read an answer), which goes on."""
        self._stop_asking()
        phase = self._phase
        if phase is not None and not phase.done():
            phase.set_exception(exc)
        else:
            log.error("match %s: a turn failed outside a phase", self.match_id, exc_info=exc)

    def _end_phase(self, value: list[bool] | None = None) -> None:
        phase = self._phase
        if phase is not None and not phase.done():
            phase.set_result(value)

    def _ask_rotations(self) -> None:
        """Every seat's rotation request at once; the phase ends with the last answer."""
        state = self.state
        round_index = state.round_index
        choices = [False] * len(self.seats)
        left = [len(self.seats)]

        def ask(seat: Seat) -> None:
            hand = tuple(state.deals[round_index][seat.index])

            def event(request_id: int, deadline_ms: int, time_bank_ms: int
                      ) -> RotationRequested:
                return RotationRequested(self.match_id, request_id, seat.index, round_index,
                                         hand, deadline_ms, time_bank_ms)

            def done(rotate: bool | None) -> None:
                choices[seat.index] = bool(rotate)
                left[0] -= 1
                if not left[0]:
                    self._end_phase(choices)

            self._ask(seat, event, _rotation_of, done)

        for seat in self.seats:
            ask(seat)

    def fallback(self) -> Action:
        """The documented always-legal move: the first legal Show (lowest start, then
        shortest), else the left end of the active set, unturned, into position 0."""
        shows = self.state.legal_shows()
        return shows[0] if shows else Scout(End.LEFT, False, 0)

    def _accept_action(self, answer: Answer) -> Action:
        assert isinstance(answer, ActionAnswer)  # answers reach requests of their kind (route)
        action = answer.action
        if action is None:
            raise MalformedAction(answer.unreadable)
        self.state.check(action)
        return action

    def _advance(self) -> None:
        """Play on until a bot has to answer: the fallback for a forfeited seat, else a
        decision request. The phase ends when a round's rotations are due or the match is
        over."""
        state = self.state
        while not state.is_over and state.phase is not Phase.ROTATION:
            actor = state.current_seat
            assert actor is not None
            seat = self.seats[actor]
            if not seat.forfeited:
                observation = state.observation(actor)

                def event(request_id: int, deadline_ms: int, time_bank_ms: int,
                          observation: Observation = observation) -> DecisionRequested:
                    return DecisionRequested(self.match_id, request_id, observation,
                                             deadline_ms, time_bank_ms)

                self._ask(seat, event, self._accept_action, self._decided)
                return
            self._play(self.fallback(), by_referee=True)
        self._end_phase()

    def _decided(self, action: Action | None) -> None:
        if action is None:
            self._play(self.fallback(), by_referee=True)
        else:
            self._play(action, by_referee=False)
        self._advance()

    def _play(self, action: Action, by_referee: bool) -> None:
        state = self.state
        rounds_before = len(state.round_results)
        round_index = state.round_index
        state.apply(action)
        self._action_done(round_index, by_referee)
        if len(state.round_results) > rounds_before:
            self._round_done(rounds_before)
            if not state.is_over:
                self._round_started()

    # ----- the match loop -----------------------------------------------------------------

    def cancel(self) -> bool:
        """Stop the match without a result: it is aborted and its record written. A task
        cancelled before its first step never runs its body (no record, its seats and its
        place in the referee held for ever), so a match whose task has not begun yet is
        told to abort as it begins. False when it has ended already."""
        task = self.task
        if task is None or task.done():
            return False
        if self._begun:
            task.cancel()
        else:
            self._abort_at_start = True
        return True

    async def run(self) -> None:
        """The match from start to record. Its turns run outside this task, as answers come
        (`answer_turn`); the task waits for each phase (a round's rotations, its decisions)
        to end, and writes the record. Cancel it with `cancel`, not through its task."""
        self._begun = True
        state = self.state
        loop = asyncio.get_running_loop()
        try:
            if self._abort_at_start:
                raise asyncio.CancelledError
            for seat in self.seats:
                seat.send(self.wire.encode(self._match_started(seat, resumed=False)))
            self._round_started()
            while not state.is_over:
                phase = self._phase = loop.create_future()
                if state.phase is Phase.ROTATION:
                    self._ask_rotations()
                    choices = await phase
                    assert choices is not None
                    for seat, rotate in zip(self.seats, choices, strict=True):
                        state.choose_rotation(seat.index, rotate)
                    continue
                self._advance()
                await phase
            self._phase = None
            await self._finish(MatchStatus.FINISHED)
        except asyncio.CancelledError:
            self._stop_asking()
            await asyncio.shield(self._finish(MatchStatus.ABORTED))
            raise
        except Exception:
            log.exception("match %s crashed", self.match_id)
            self._stop_asking()
            await asyncio.shield(self._finish(MatchStatus.ABORTED))

    def _action_done(self, round_index: int, by_referee: bool) -> None:
        public = self.state.last_action
        assert public is not None
        event = ActionPlayed(self.match_id, round_index, public, by_referee)
        self._broadcast_unless_lean(event)
        self._publish(event)

    def _round_started(self) -> None:
        state = self.state
        self._publish(RoundStarted(self.match_id, state.round_index, state.starting_seat,
                                   tuple(len(h) for h in state.hands)))

    def _round_done(self, index: int) -> None:
        state = self.state
        round_log = state.round_logs[index]
        assert round_log.result is not None
        event = RoundEnded(self.match_id, round_log.result, tuple(state.scores),
                           round_log.dealt_hands, tuple(round_log.rotations))
        self._broadcast(event)
        self._publish(event)

    async def _finish(self, status: MatchStatus) -> None:
        if self._finishing:
            return
        self._finishing = True
        state = self.state
        forfeits = self.forfeited
        meta = RefereeMeta(
            status=status.value, decision_ms=self.time_control.decision_ms,
            time_bank_ms=self.time_control.time_bank_ms, bot_versions=tuple(self.versions),
            created_at=self.created_at, ended_at=time.time(),
            seats=tuple(SeatStats(strikes=s.strikes, timeouts=s.timeouts,
                                  illegal_actions=s.illegal, forfeited=s.forfeited,
                                  time_bank_ms=int(s.clock.bank_ms),
                                  referee_ms=int(s.clock.referee_ms)) for s in self.seats),
            extra=self.extra_meta)
        self.record = build_record(state, self.names, match_id=self.match_id,
                                   forfeits=forfeits, notes=self.notes, meta=meta)
        # A match that is over stays over: cancelled while its record is being written (a
        # shutdown, a stopped tournament), it ends as it was once the record is on disk (for
        # up to STORE_AFTER_CANCEL_S more), and the cancellation comes after.
        stored = asyncio.ensure_future(self.host.store_record(self))
        cancelled = False
        while not stored.done():
            try:
                await asyncio.wait((stored,), timeout=STORE_AFTER_CANCEL_S if cancelled
                                   else None)
            except asyncio.CancelledError:
                cancelled = True
                continue
            if cancelled:
                break
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
        self._closed = True
        if status is MatchStatus.FINISHED:
            ended = MatchEnded(self.match_id, tuple(state.scores),
                               rank_scores(state.scores, forfeits), tuple(forfeits),
                               record_id=self.match_id)
            self._broadcast(ended)
            self._publish(ended)
        else:
            self._publish(self.snapshot())
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
        if cancelled:
            raise asyncio.CancelledError
