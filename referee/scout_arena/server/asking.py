"""How one match asks its seats: each request sent, its answers judged, its clock kept.

A request goes out with `ask`; the seat's turn (`answer_turn`, run through the `TurnGate` when
an answer is delivered or the seat's timer goes off) takes the delivered answers in order until
one is acceptable, strikes each that is not, and times the request out once its time is spent.
The match hears the outcome through the request's ``done``: the accepted value, or None when
the referee plays the fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from scout_rules import IllegalAction, MalformedAction, OutOfTurn
from scout_rules.protocol import TimeControl

from .events import Answer, AnswerStatus, MatchWire, Request
from .metrics import RefereeMetrics
from .seat import FORFEIT, OpenRequest, Seat, SeatRequest
from .table import Table

if TYPE_CHECKING:
    from .match import MatchRunner

T = TypeVar("T")


class Asking:
    """The requests of one match to its seats, and what becomes of their answers."""

    __slots__ = ("_next_request", "decision_ms", "decision_s", "match", "metrics", "table",
                 "wire")

    def __init__(self, match: MatchRunner, table: Table, time_control: TimeControl,
                 wire: MatchWire, metrics: RefereeMetrics) -> None:
        self.match = match
        self.table = table
        self.decision_ms = time_control.decision_ms
        self.decision_s = time_control.decision_ms / 1000
        self.wire = wire
        self.metrics = metrics
        self._next_request = 0

    def ask(self, seat: Seat, event: Callable[[int, int, int], Request],
             read: Callable[[Answer], T], done: Callable[[T | None], None]) -> None:
        """Send one request; ``done`` gets what ``read`` made of an acceptable answer within
        decision time + bank, or None when the referee plays the fallback (timeout, forfeit):
        from `answer_turn`, which runs when an answer comes or the timer goes off."""
        if seat.forfeited:
            done(None)
            return
        self._next_request += 1
        request_id = self._next_request
        request = event(request_id, self.decision_ms, int(seat.clock.bank_ms))
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
        match = self.match
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
                    match.strike(seat, "malformed_action" if malformed else "illegal_action",
                                f"request {request.request_id}: {exc}")
                    status = AnswerStatus.MALFORMED if malformed else AnswerStatus.ILLEGAL
                    self.table.judge(seat, request.request_id, status, str(exc))
                    if seat.forfeited:
                        self._answered(seat, request)
                        return
                    continue
                taken = seat.clock.answered(received_at, loop_lag)
                self.metrics.answered_request(request.kind, taken, self.decision_s)
                seat.open = None
                self.table.judge(seat, request.request_id, AnswerStatus.ACCEPTED)
                self._answered(seat, request)
                return
            remaining = seat.time_left()
            if remaining > 0:
                seat.arm_timer(remaining)
                return
            decision_ms = self.decision_ms
            seat.clock.ran_out()
            seat.timeouts += 1
            self.metrics.time_losses.inc()
            seat.open = None
            match.strike(seat, "timeout", f"no acceptable answer to request "
                        f"{request.request_id} within {decision_ms} ms and the bank")
            self.table.judge(seat, request.request_id, AnswerStatus.TIMED_OUT,
                       "time ran out (decision time and bank); the referee played the "
                       "fallback")
            self._answered(seat, request)
        except Exception as exc:  # the match ends on it (`run` logs it)
            match.play.crash(exc)

    @staticmethod
    def _answered(seat: Seat, request: SeatRequest) -> None:
        seat.open = None
        seat.answers.clear()
        request.close()
