"""The bots' live Play streams as the referee sees them: who is connected, and where answers go.

A stream comes with `attach` (a newer stream of a bot supersedes the older one and every
running match of the bot is resynced) and goes with `detach` (a bot that stays away past the
reconnect grace forfeits its seats). Answers come in through `route`, which hands each to the
seat waiting for it or tells the bot why not. Once the referee closes, `say_goodbye` ends every
stream with a Goodbye, and streams that open later get it too (`farewell`). Everything said to
a bot is serialized by the referee's `Wire`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from scout_rules.protocol import PROTOCOL_VERSION

from .connections import BotConnection, BotEntry, BotRegistry
from .events import Answer, AnswerResult, AnswerStatus, Goodbye, Welcome, Wire
from .looplag import LoopLag
from .metrics import RefereeMetrics
from .seat import Delivered, SeatRequest

_CHOICE = {"rotation": "a RotationChoice", "decision": "an ActionChoice"}


def stale_reason(request_id: int, kind: str, open_request: SeatRequest | None) -> str:
    """Why an answer (a ``kind`` answer naming ``request_id``) is STALE, naming the request
    that is open, if any."""
    if open_request is not None and open_request.request_id == request_id:
        return (f"request {request_id} is a {open_request.kind} request: answer it with "
                f"{_CHOICE[open_request.kind]}, not {_CHOICE[kind]}")
    why = f"request {request_id} is not open (already answered, timed out, or never sent)"
    if open_request is not None:
        why += (f"; the open request is {open_request.request_id} (a {open_request.kind} "
                f"request, answered with {_CHOICE[open_request.kind]})")
    return why


class Streams:
    """The live stream of each bot, the reconnect grace of those that lost theirs, and the
    routing of answers to seats.

    ``on_connect`` callbacks hear of every accepted stream (new or resumed); ``then`` runs
    after them (the referee starts the assigned matches that waited for the bot)."""

    def __init__(self, bots: BotRegistry, wire: Wire, metrics: RefereeMetrics, loop_lag: LoopLag,
                 reconnect_grace_s: float,
                 then: Callable[[BotEntry], None] = lambda bot: None) -> None:
        self.bots = bots
        self.wire = wire
        self.metrics = metrics
        self.loop_lag = loop_lag
        self.reconnect_grace_s = reconnect_grace_s
        self.on_connect: list[Callable[[BotEntry], None]] = []
        self._then = then
        self.farewell: bytes | None = None
        """The serialized Goodbye once the referee closes its streams: new ones get it too."""

    def attach(self, connection: BotConnection) -> bool:
        """Welcome ``connection`` and make it its bot's live one, superseding any older
        stream, and resync every running match of the bot. Returns whether running matches
        were resumed."""
        bot = connection.bot
        resumed = bool(bot.seats)
        welcome = Welcome(PROTOCOL_VERSION, bot.name, connection.session_id, resumed)
        connection.send(self.wire.encode(welcome))
        old = bot.connection
        if old is not None and old is not connection:
            old.superseded = True
            old.close()
            if old.handler_task is not None:
                old.handler_task.cancel()
        if bot.grace_task is not None:
            bot.grace_task.cancel()
            bot.grace_task = None
        detail = ("resumed with a full resync" if old is None else
                  "a newer connection took over (the older one was not yet seen to end); "
                  "resumed with a full resync")
        bot.connection = connection
        if old is None:
            self.metrics.connected_bots.inc()
        for seat in list(bot.seats.values()):
            seat.match.note("reconnect", seat.index, detail)
            seat.match.table.resync(seat)
        for callback in self.on_connect:
            callback(bot)
        self._then(bot)
        return resumed

    def detach(self, connection: BotConnection) -> None:
        """A stream ended. If it was the bot's live one, start the reconnect grace."""
        bot = connection.bot
        if bot.connection is not connection:
            return
        bot.connection = None
        self.metrics.connected_bots.dec()
        if bot.seats:
            for seat in bot.seats.values():
                seat.match.note("disconnect", seat.index,
                                f"stream ended; {self.reconnect_grace_s:g} s to reconnect")
                if seat.open is not None:
                    # Not handed to the transport before the stream ended: its clock runs.
                    seat.handed_off(seat.open.request_id)
            bot.grace_task = asyncio.get_running_loop().create_task(self._grace(bot))

    async def _grace(self, bot: BotEntry) -> None:
        await asyncio.sleep(self.reconnect_grace_s)
        if bot.connection is None:
            # The bot has left these matches: a later connection resumes none of them
            # (Welcome{resumed: false}, nothing more about them) and gets only new matches.
            for match_id, seat in list(bot.seats.items()):
                seat.match.forfeit(seat, f"disconnected for more than "
                                         f"{self.reconnect_grace_s:g} s")
                seat.absent = True
                del bot.seats[match_id]

    def route(self, connection: BotConnection, answer: Answer,
              received_at: float | None = None) -> None:
        """Hand a bot's answer to the seat waiting for it, or tell the bot why not.
        ``received_at``: the monotonic time it was read off the stream (default: now)."""
        match_id, request_id = answer.match_id, answer.request_id
        seat = connection.bot.seats.get(match_id)
        if seat is None:
            connection.send(self.wire.encode(AnswerResult(
                match_id, request_id, AnswerStatus.UNKNOWN_MATCH,
                f"you are not playing a match with id {match_id!r}")))
            return
        request = seat.open
        if request is None or request.request_id != request_id or request.kind != answer.kind:
            seat.match.table.judge(seat, request_id, AnswerStatus.STALE,
                             stale_reason(request_id, answer.kind, request))
            return
        seat.deliver(Delivered(answer, time.monotonic() if received_at is None else received_at,
                               self.loop_lag.lag()))

    async def say_goodbye(self, goodbye: Goodbye, wait_s: float) -> None:
        """Tell every connected bot ``goodbye`` as its stream's last message, and any stream
        that opens from now on too; wait up to ``wait_s`` for those streams to end (each ends
        with OK once its Goodbye is written)."""
        message = self.wire.encode(goodbye)
        self.farewell = message
        handlers = []
        for bot in self.bots:
            connection = bot.connection
            if connection is None:
                continue
            connection.say_goodbye(message)
            if connection.handler_task is not None and not connection.handler_task.done():
                handlers.append(connection.handler_task)
        if handlers:
            await asyncio.wait(handlers, timeout=wait_s)

    def connected(self) -> int:
        return sum(1 for bot in self.bots if bot.connection is not None)
