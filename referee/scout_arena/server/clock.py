"""Time control: what a match grants per decision and per match, and each seat's bank.

A request's clock starts once the stream's writer has handed it to the transport, i.e. once the
write carrying it has completed (not when the match queues it, nor when the write begins: time
a request spends queued inside the referee, its gRPC included, is the referee's, counted in
``referee_ms``, never the bot's; on a busy referee the completion is seen as late as an answer
is read, so the two lags cancel) and stops when the answer is read off the stream, so a slow
network costs the bot, never the other seats. Answering within the decision time is free;
beyond it the overrun comes out of the seat's bank, and a request still unanswered when both
are spent times out.

The referee's share has a ceiling, `MAX_HANDOFF_WAIT_S`: a request the transport has not taken
by then is charged from that moment. A stream's writer waits on the transport when the bot
stops reading (HTTP/2 flow control), and an uncapped wait would let such a bot, or a stream
that died without the referee noticing, hold its matches still for ever.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from scout_rules.protocol import TimeControl

from .errors import InvalidTimeControl

MAX_DECISION_MS = 600_000
MAX_HANDOFF_WAIT_S = 5.0
"""The longest a queued request waits for the transport before its clock starts anyway."""


def check_time_control(time_control: TimeControl) -> None:
    """Refuse a time control no match may use (a zero decision time could never be met)."""
    for value, what in ((time_control.decision_ms, "decision_ms"),
                        (time_control.time_bank_ms, "time_bank_ms")):
        if not 0 <= value <= MAX_DECISION_MS or (what == "decision_ms" and value < 1):
            raise InvalidTimeControl(f"{what} {value} is out of range")


DEFAULT_TIME_CONTROL = TimeControl()


@dataclass(slots=True)
class SeatClock:
    """One seat's bank over a match, and when its open request was queued and sent."""

    decision_ms: int
    bank_ms: float
    sent_at: float = 0.0
    queued_at: float = 0.0
    started: bool = True
    """Whether the open request's clock runs (it was handed to the transport)."""
    referee_ms: float = 0.0
    """Time the seat's requests spent queued inside the referee, over the match."""

    def queue(self) -> None:
        """A request is queued for the bot: its clock waits for `start` (the hand-off)."""
        self.queued_at = time.monotonic()
        self.started = False

    def start(self) -> None:
        """The request was handed to the transport (or there is nobody to hand it to): its
        clock runs from now. Idempotent."""
        if self.started:
            return
        now = time.monotonic()
        self.sent_at = now
        self.referee_ms += max(0.0, now - self.queued_at) * 1000
        self.started = True

    def expires_at(self) -> float:
        """The monotonic time the open request times out at: from its hand-off, or, until
        then, from the latest moment its clock can start (`MAX_HANDOFF_WAIT_S`)."""
        start = self.sent_at if self.started else self.queued_at + MAX_HANDOFF_WAIT_S
        return start + self.allowed_s()

    def allowed_s(self) -> float:
        """Decision time plus what is left of the bank, in seconds: how long the open request
        may take on the bot's clock."""
        return (self.decision_ms + self.bank_ms) / 1000

    def answered(self, received_at: float, loop_lag: float = 0.0) -> float:
        """Charge the bank whatever an accepted answer took beyond the decision time, and
        return the seconds the answer took on the bot's clock. The ``loop_lag`` the referee
        ran behind when it read the answer (`looplag`) is the referee's, as far as the
        answer's whole wait goes."""
        self.start()
        credit = max(0.0, min(loop_lag, received_at - self.sent_at))
        self.referee_ms += credit * 1000
        taken = max(0.0, received_at - credit - self.sent_at)
        overrun = taken * 1000 - self.decision_ms
        if overrun > 0:
            self.bank_ms = max(0.0, self.bank_ms - overrun)
        return taken

    def ran_out(self) -> None:
        self.bank_ms = 0

    def left(self) -> tuple[int, int]:
        """(decision time, bank) still left for the open request: a resync re-sends the request
        with these, because reconnecting does not restart its clock."""
        elapsed_ms = (time.monotonic() - self.sent_at) * 1000 if self.started else 0.0
        decision = max(0, int(self.decision_ms - elapsed_ms))
        bank = max(0, int(self.bank_ms - max(0.0, elapsed_ms - self.decision_ms)))
        return decision, bank
