"""What one match says to the seats at its table, through the match's wire.

Each event is serialized once (`MatchWire.encode`) and the bytes go to every seat that is to
get it: a broadcast to all, a played action only to the streams that are not lean (when every
stream is lean, the SDK's and every kit's default, only the wire's history keeps it), a verdict
to its seat (an ACCEPTED one only to a stream that is not lean).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scout_rules.protocol import TimeControl

from .events import ActionPlayed, AnswerResult, AnswerStatus, BotEvent, MatchStarted, MatchWire
from .seat import Seat


class Table:
    """The seats of one match as its messages reach them."""

    __slots__ = ("match_id", "names", "num_rounds", "seats", "time_control", "wire")

    def __init__(self, match_id: str, seats: Sequence[Seat], wire: MatchWire,
                 names: tuple[str, ...], num_rounds: int, time_control: TimeControl) -> None:
        self.match_id = match_id
        self.seats = seats
        self.wire = wire
        self.names = names
        self.num_rounds = num_rounds
        self.time_control = time_control

    def broadcast(self, event: BotEvent) -> None:
        message = self.wire.encode(event)
        for seat in self.seats:
            seat.send(message)

    def broadcast_unless_lean(self, event: ActionPlayed) -> None:
        """Serialized once, sent to the seats whose streams are not lean; when every stream
        is lean only the wire's history keeps it."""
        receivers = [seat for seat in self.seats if seat.wants_public_events()]
        if not receivers:
            self.wire.played(event)
            return
        message = self.wire.encode(event)
        for seat in receivers:
            seat.send(message)

    def match_started(self, seat: Seat, resumed: bool) -> None:
        seat.send(self.wire.encode(MatchStarted(
            self.match_id, seat.index, self.names, len(self.names), self.num_rounds,
            self.time_control, resumed, int(seat.clock.bank_ms), seat.strikes)))

    def resync(self, seat: Seat) -> None:
        """After a reconnect: the match's start again, then the open request with its time
        left."""
        self.match_started(seat, resumed=True)
        request = seat.open
        if request is None:
            return
        deadline_ms, time_bank_ms = seat.clock.left()
        seat.send_request(self.wire.encode(dataclasses.replace(
            request.event, deadline_ms=deadline_ms, time_bank_ms=time_bank_ms)),
            request.request_id)

    def judge(self, seat: Seat, request_id: int, verdict: AnswerStatus, reason: str = "") -> None:
        if verdict is AnswerStatus.ACCEPTED and not seat.wants_public_events():
            return
        seat.send(self.wire.encode(AnswerResult(self.match_id, request_id, verdict, reason,
                                                seat.strikes, int(seat.clock.bank_ms))))
