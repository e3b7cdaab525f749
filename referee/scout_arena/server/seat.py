"""A seat of a match, and the requests and answers that pass through it.

A seat has at most one request open (`OpenRequest`, generic in the value its answer makes),
and a queue of what was delivered for it: answers read off its bot's stream (`Delivered`) or
the marker of a forfeit (`FORFEIT`). Its turn runs through the referee's `TurnGate` when an
answer is delivered or its timer goes off; the match (`MatchRunner.answer_turn`) judges.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Final, Generic, NamedTuple, Protocol, TypeVar

from .clock import SeatClock
from .connections import BotEntry, Handoff
from .events import Answer, Request

if TYPE_CHECKING:
    from .match import MatchRunner

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
                self.match.asking.answer_turn(self)
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
