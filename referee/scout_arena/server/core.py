"""The referee's heart: registered bots, live connections, and one task per running match.

No gRPC here beyond building messages through `convert`: the servicers in `service.py` feed
incoming answers in with `Referee.route` and drain each connection's outbox. Every match is its
own asyncio task, so a slow, silent or hostile bot only ever costs its own seat time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from scout.v1 import arena_pb2, matches_pb2

from ..engine import (
    Action,
    End,
    IllegalAction,
    MalformedAction,
    OutOfTurn,
    Phase,
    Scout,
    State,
    rank_scores,
)
from ..record import JSON, MatchRecord, Note, RefereeMeta, SeatStats, build_record, dump_record
from . import convert

log = logging.getLogger("scout_arena.referee")

PROTOCOL_VERSION = 1
DEFAULT_DECISION_MS = 1000
DEFAULT_TIME_BANK_MS = 10_000
MAX_DECISION_MS = 600_000
MAX_STRIKES = 3


@dataclass(frozen=True, slots=True)
class TimeControl:
    """Per-decision time plus a per-match bank, both in milliseconds."""

    decision_ms: int = DEFAULT_DECISION_MS
    time_bank_ms: int = DEFAULT_TIME_BANK_MS


class MatchStatus(Enum):
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


class MatchRequestError(ValueError):
    """A CreateMatch that cannot be honoured; ``code`` names the gRPC status to answer with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class BotConnection:
    """One live Play stream. Messages to the bot go through ``outbox``; the servicer's writer
    drains it, so the referee never awaits a slow client."""

    def __init__(self, bot: BotEntry, session_id: str, max_matches: int, version: str) -> None:
        self.bot = bot
        self.session_id = session_id
        self.max_matches = max_matches
        self.version = version
        self.outbox: asyncio.Queue[arena_pb2.RefereeMessage | bytes | None] = asyncio.Queue()
        self.superseded = False
        self.accepts_batches = False
        self.handler_task: asyncio.Task[Any] | None = None

    def send(self, message: arena_pb2.RefereeMessage | bytes) -> None:
        self.outbox.put_nowait(message)


@dataclass(eq=False)
class BotEntry:
    """A registered bot: its token, its live connection (if any) and its seats in matches."""

    name: str
    token: str
    connection: BotConnection | None = None
    seats: dict[str, Seat] = field(default_factory=dict)
    grace_task: asyncio.Task[None] | None = None

    @property
    def free_slots(self) -> int:
        if self.connection is None:
            return 0
        return self.connection.max_matches - len(self.seats)


@dataclass(slots=True)
class OpenRequest:
    request_id: int
    kind: str
    message: arena_pb2.RefereeMessage | bytes
    sent_at: float


_FORFEIT = object()
_TIMEOUT = object()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass(eq=False)
class Seat:
    """One bot's place in one match, with its clock and strikes."""

    match: MatchRunner
    index: int
    bot: BotEntry
    bank_ms: float
    strikes: int = 0
    forfeited: bool = False
    absent: bool = False
    timeouts: int = 0
    illegal: int = 0
    open: OpenRequest | None = None
    answers: deque[Any] = field(default_factory=deque)
    waiter: asyncio.Future[None] | None = None

    def deliver(self, item: Any) -> None:
        """An answer (or the forfeit signal) for the request this seat has open."""
        self.answers.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_answer(self, limit: float) -> Any:
        """The next delivered item, or `_TIMEOUT` at monotonic time ``limit``. A future and a
        timer per wait: cheaper than wait_for, which makes a task every time."""
        loop = asyncio.get_running_loop()
        while not self.answers:
            remaining = limit - time.monotonic()
            if remaining <= 0:
                return _TIMEOUT
            waiter = self.waiter = loop.create_future()
            timer = loop.call_later(remaining, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self.waiter = None
        return self.answers.popleft()

    def send(self, message: arena_pb2.RefereeMessage | bytes) -> None:
        connection = self.bot.connection
        if connection is not None and not self.absent:
            connection.send(message)


class MatchRunner:
    """Plays one match: asks each seat in turn, enforces the clock, records everything."""

    def __init__(self, referee: Referee, match_id: str, bots: Sequence[BotEntry], seed: int,
                 time_control: TimeControl) -> None:
        self.referee = referee
        self.match_id = match_id
        self.seed = seed
        self.time_control = time_control
        self.state = State.new(len(bots), seed)
        self.seats = [Seat(self, i, bot, float(time_control.time_bank_ms))
                      for i, bot in enumerate(bots)]
        self.names = [bot.name for bot in bots]
        self.versions = [bot.connection.version if bot.connection else "" for bot in bots]
        self.status = MatchStatus.RUNNING
        self.notes: list[Note] = []
        self.record: MatchRecord | None = None
        self.spectator_log: list[matches_pb2.SpectatorEvent] = []
        self._changed = asyncio.Event()
        self._closed = False  # set with the last spectator event (after the record is stored)
        self._next_request = 0
        self._history = bytearray()
        self.created_at = time.time()
        self.task: asyncio.Task[None] | None = None
        self.extra_meta: JSON = {}
        self._finishing = False

    # ----- public views -----------------------------------------------------------------

    @property
    def forfeited(self) -> list[int]:
        return [s.index for s in self.seats if s.forfeited]

    def info(self) -> matches_pb2.MatchInfo:
        state = self.state
        msg = matches_pb2.MatchInfo(
            match_id=self.match_id,
            status={MatchStatus.RUNNING: matches_pb2.MATCH_STATUS_RUNNING,
                    MatchStatus.FINISHED: matches_pb2.MATCH_STATUS_FINISHED,
                    MatchStatus.ABORTED: matches_pb2.MATCH_STATUS_ABORTED}[self.status],
            bots=self.names,
            seed=self.seed,
            time_control=convert.time_control_to_pb(self.time_control.decision_ms,
                                                    self.time_control.time_bank_ms),
            round_index=state.round_index,
            totals=state.scores,
            forfeited_seats=self.forfeited,
        )
        if self.status is MatchStatus.FINISHED:
            msg.ranks.extend(rank_scores(state.scores, self.forfeited))
        return msg

    async def watch(self) -> AsyncIterator[matches_pb2.SpectatorEvent]:
        """Every public event from the start, then live ones until the match ends."""
        yield matches_pb2.SpectatorEvent(match_info=self.info())
        sent = 0
        while True:
            changed = self._changed
            while sent < len(self.spectator_log):
                yield self.spectator_log[sent]
                sent += 1
            if self._closed:
                return
            await changed.wait()

    def _publish(self, event: matches_pb2.SpectatorEvent) -> None:
        self.spectator_log.append(event)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _note(self, kind: str, seat: int, detail: str) -> None:
        state = self.state
        self.notes.append(Note(kind, seat, state.round_index,
                               len(state.round_logs[-1].actions), detail))

    # ----- messages to seats --------------------------------------------------------------

    def _broadcast(self, message: arena_pb2.RefereeMessage) -> None:
        data = message.SerializeToString()
        for seat in self.seats:
            seat.send(data)

    def match_start(self, seat: Seat, resumed: bool) -> arena_pb2.RefereeMessage:
        return arena_pb2.RefereeMessage(match_start=arena_pb2.MatchStart(
            match_id=self.match_id, seat=seat.index, player_names=self.names,
            num_players=self.state.num_players, num_rounds=self.state.num_rounds,
            time_control=convert.time_control_to_pb(self.time_control.decision_ms,
                                                    self.time_control.time_bank_ms),
            resumed=resumed, time_bank_ms=int(seat.bank_ms), strikes=seat.strikes))

    def resync(self, seat: Seat) -> None:
        """After a reconnect: the match's start again, then the open request with its time
        left."""
        seat.send(self.match_start(seat, resumed=True))
        request = seat.open
        if request is None:
            return
        message = arena_pb2.RefereeMessage()
        if isinstance(request.message, bytes):
            message.ParseFromString(request.message)
        else:
            message.CopyFrom(request.message)
        elapsed_ms = (time.monotonic() - request.sent_at) * 1000
        left = max(0, int(self.time_control.decision_ms - elapsed_ms))
        bank = max(0, int(seat.bank_ms - max(0.0, elapsed_ms - self.time_control.decision_ms)))
        body = message.decision_request if request.kind == "decision" else \
            message.rotation_request
        body.deadline_ms = left
        body.time_bank_ms = bank
        seat.send(message)

    def _answer_result(self, seat: Seat, request_id: int, status: int, reason: str = "") -> None:
        seat.send(arena_pb2.RefereeMessage(answer_result=arena_pb2.AnswerResult(
            match_id=self.match_id, request_id=request_id, status=status,  # type: ignore[arg-type]
            reason=reason, strikes=seat.strikes, time_bank_ms=int(seat.bank_ms))))

    # ----- strikes and forfeits -----------------------------------------------------------

    def strike(self, seat: Seat, kind: str, detail: str) -> None:
        seat.strikes += 1
        self._note(kind, seat.index, detail)
        if seat.strikes >= self.referee.max_strikes and not seat.forfeited:
            self.forfeit(seat, f"{seat.strikes} strikes")

    def forfeit(self, seat: Seat, reason: str) -> None:
        if seat.forfeited or self.status is not MatchStatus.RUNNING:
            return
        seat.forfeited = True
        self._note("forfeit", seat.index, reason)
        log.info("match %s: seat %d (%s) forfeits: %s", self.match_id, seat.index,
                 seat.bot.name, reason)
        if seat.open is not None:
            seat.deliver(_FORFEIT)

    # ----- asking for answers -------------------------------------------------------------

    async def _ask(self, seat: Seat, kind: str,
                   build: Callable[[int, int, int], arena_pb2.RefereeMessage | bytes],
                   accept: Callable[[Any], Any]) -> Any:
        """Send one request and wait for an acceptable answer within decision time + bank.

        Returns what ``accept`` made of the answer, or None when the referee must play the
        fallback (timeout or forfeit)."""
        if seat.forfeited:
            return None
        self._next_request += 1
        request_id = self._next_request
        decision_ms = self.time_control.decision_ms
        message = build(request_id, decision_ms, int(seat.bank_ms))
        sent_at = time.monotonic()
        seat.open = OpenRequest(request_id, kind, message, sent_at)
        seat.send(message)
        limit = sent_at + (decision_ms + seat.bank_ms) / 1000
        try:
            while True:
                item = await seat.next_answer(limit)
                if item is _TIMEOUT:
                    seat.bank_ms = 0
                    seat.timeouts += 1
                    seat.open = None
                    self.strike(seat, "timeout", f"no acceptable answer to request "
                                f"{request_id} within {decision_ms} ms and the bank")
                    self._answer_result(seat, request_id, arena_pb2.ANSWER_STATUS_TIMED_OUT,
                                        "time ran out (decision time and bank); the referee "
                                        "played the fallback")
                    return None
                if item is _FORFEIT:
                    return None
                payload, received_at = item
                try:
                    value = accept(payload)
                except (MalformedAction, IllegalAction, OutOfTurn) as exc:
                    malformed = isinstance(exc, MalformedAction)
                    seat.illegal += 1
                    self.strike(seat, "illegal_action", f"request {request_id}: {exc}")
                    self._answer_result(
                        seat, request_id,
                        arena_pb2.ANSWER_STATUS_MALFORMED if malformed
                        else arena_pb2.ANSWER_STATUS_ILLEGAL, str(exc))
                    if seat.forfeited:
                        return None
                    continue
                overrun = (received_at - sent_at) * 1000 - decision_ms
                if overrun > 0:
                    seat.bank_ms = max(0.0, seat.bank_ms - overrun)
                seat.open = None
                self._answer_result(seat, request_id, arena_pb2.ANSWER_STATUS_ACCEPTED)
                return value
        finally:
            seat.open = None
            seat.answers.clear()

    async def _rotation(self, seat: Seat) -> bool:
        state = self.state
        hand = state.deals[state.round_index][seat.index]

        def build(request_id: int, deadline: int, bank: int) -> arena_pb2.RefereeMessage:
            return convert.rotation_request(self.match_id, request_id, state.round_index,
                                            hand, deadline, bank)

        def accept(payload: Any) -> bool:
            return bool(payload)

        choice = await self._ask(seat, "rotation", build, accept)
        return bool(choice) if choice is not None else False

    def fallback(self) -> Action:
        """The documented always-legal move: the first legal Show (lowest start, then
        shortest), else the left end of the active set, unturned, into position 0."""
        shows = self.state.legal_shows()
        return shows[0] if shows else Scout(End.LEFT, False, 0)

    async def _decision(self, seat: Seat) -> tuple[Action, bool]:
        state = self.state
        observation = state.observation(seat.index)

        def build(request_id: int, deadline: int, bank: int) -> bytes:
            return convert.decision_request_bytes(observation, self.match_id, request_id,
                                                  deadline, bank, bytes(self._history))

        def accept(payload: Any) -> Action:
            action = convert.action_from_pb(payload)
            state.check(action)
            return action

        action = await self._ask(seat, "decision", build, accept)
        if action is None:
            return self.fallback(), True
        return action, False

    # ----- the match loop -----------------------------------------------------------------

    async def run(self) -> None:
        state = self.state
        try:
            for seat in self.seats:
                seat.send(self.match_start(seat, resumed=False))
            self._round_started()
            while not state.is_over:
                if state.phase is Phase.ROTATION:
                    choices = await asyncio.gather(*(self._rotation(s) for s in self.seats))
                    for seat, rotate in zip(self.seats, choices, strict=True):
                        state.choose_rotation(seat.index, rotate)
                    continue
                actor = state.current_seat
                assert actor is not None
                seat = self.seats[actor]
                action, by_referee = await self._decision(seat)
                rounds_before = len(state.round_results)
                round_index = state.round_index
                state.apply(action)
                self._action_done(round_index, by_referee)
                if len(state.round_results) > rounds_before:
                    self._round_done(rounds_before)
                    if not state.is_over:
                        self._round_started()
            await self._finish(MatchStatus.FINISHED)
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(MatchStatus.ABORTED))
            raise
        except Exception:
            log.exception("match %s crashed", self.match_id)
            await asyncio.shield(self._finish(MatchStatus.ABORTED))

    def _action_done(self, round_index: int, by_referee: bool) -> None:
        public = self.state.last_action
        assert public is not None
        action = convert.public_action_to_pb(public, by_referee)
        self._history += convert.history_entry_bytes(action)
        event = arena_pb2.PublicEvent(match_id=self.match_id, round_index=round_index,
                                      action=action)
        self._broadcast(arena_pb2.RefereeMessage(public_event=event))
        self._publish(matches_pb2.SpectatorEvent(public_event=event))

    def _round_started(self) -> None:
        state = self.state
        self._history = bytearray()
        self._publish(matches_pb2.SpectatorEvent(round_started=matches_pb2.RoundStarted(
            match_id=self.match_id, round_index=state.round_index,
            starting_seat=state.starting_seat, hand_sizes=[len(h) for h in state.hands])))

    def _round_done(self, index: int) -> None:
        state = self.state
        round_log = state.round_logs[index]
        assert round_log.result is not None
        ended = convert.round_ended(self.match_id, round_log.result, state.scores,
                                    round_log.dealt_hands, round_log.rotations)
        self._broadcast(arena_pb2.RefereeMessage(round_ended=ended))
        self._publish(matches_pb2.SpectatorEvent(round_ended=ended))

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
                                  time_bank_ms=int(s.bank_ms)) for s in self.seats),
            extra=self.extra_meta)
        self.record = build_record(state, self.names, match_id=self.match_id,
                                   forfeits=forfeits, notes=self.notes, meta=meta)
        await self.referee.store_record(self)
        # The status changes only once the record is on disk: FINISHED means it can be read.
        self.status = status
        # Watchers stop on this flag, set just before the last event is published.
        self._closed = True
        if status is MatchStatus.FINISHED:
            ended = arena_pb2.MatchEnded(
                match_id=self.match_id, totals=state.scores,
                ranks=rank_scores(state.scores, forfeits), forfeited_seats=forfeits,
                record_id=self.match_id)
            self._broadcast(arena_pb2.RefereeMessage(match_ended=ended))
            self._publish(matches_pb2.SpectatorEvent(match_ended=ended))
        else:
            self._publish(matches_pb2.SpectatorEvent(match_info=self.info()))
        for seat in self.seats:
            seat.bot.seats.pop(self.match_id, None)
        self.referee.match_finished(self)


class Referee:
    """Registered bots, their connections, and every match, running or done."""

    def __init__(self, tokens: dict[str, str], *, records_dir: Path | None = None,
                 default_time_control: TimeControl = TimeControl(),
                 reconnect_grace_s: float = 10.0, max_strikes: int = MAX_STRIKES) -> None:
        self.bots: dict[str, BotEntry] = {}
        self._by_token: dict[str, BotEntry] = {}
        for name, token in tokens.items():
            self.register(name, token)
        self.records_dir = records_dir
        self.default_time_control = default_time_control
        self.reconnect_grace_s = reconnect_grace_s
        self.max_strikes = max_strikes
        self.matches: dict[str, MatchRunner] = {}
        self.accepting = True
        self._idle = asyncio.Event()
        self._idle.set()
        self.on_match_finished: list[Callable[[MatchRunner], None]] = []
        self.on_connect: list[Callable[[BotEntry], None]] = []
        self.authenticator: Callable[[str], Awaitable[str | None]] | None = None

    def register(self, name: str, token: str) -> BotEntry:
        if not name or not token:
            raise ValueError("a bot needs a name and a token")
        if token in self._by_token and self._by_token[token].name != name:
            raise ValueError(f"token of bot {name!r} is already used by another bot")
        entry = self.bots.get(name)
        if entry is None:
            entry = self.bots[name] = BotEntry(name, token)
        else:
            self._by_token.pop(entry.token, None)
            entry.token = token
        self._by_token[token] = entry
        return entry

    def bot_for_token(self, token: str) -> BotEntry | None:
        entry = self._by_token.get(token)
        if entry is None:
            return None
        return entry if secrets.compare_digest(entry.token, token) else None

    async def authenticate(self, token: str) -> BotEntry | None:
        """The bot a token belongs to: the in-memory tokens, else the ``authenticator`` (the
        ladder's, which looks up a hash in its database off the event loop)."""
        if not token:
            return None
        entry = self.bot_for_token(token)
        if entry is not None or self.authenticator is None:
            return entry
        name = await self.authenticator(token)
        if name is None:
            return None
        entry = self.bots.get(name)
        if entry is None:
            entry = self.bots[name] = BotEntry(name, token="")
        return entry

    # ----- connections --------------------------------------------------------------------

    def attach(self, connection: BotConnection) -> bool:
        """Make ``connection`` its bot's live one, superseding any older stream, and resync
        every running match of the bot. Returns whether running matches were resumed."""
        bot = connection.bot
        old = bot.connection
        if old is not None and old is not connection:
            old.superseded = True
            old.outbox.put_nowait(None)
            if old.handler_task is not None:
                old.handler_task.cancel()
        if bot.grace_task is not None:
            bot.grace_task.cancel()
            bot.grace_task = None
        detail = ("resumed with a full resync" if old is None else
                  "a newer connection took over (the older one was not yet seen to end); "
                  "resumed with a full resync")
        bot.connection = connection
        for seat in list(bot.seats.values()):
            seat.match._note("reconnect", seat.index, detail)
            seat.match.resync(seat)
        for callback in self.on_connect:
            callback(bot)
        return bool(bot.seats)

    def detach(self, connection: BotConnection) -> None:
        """A stream ended. If it was the bot's live one, start the reconnect grace."""
        bot = connection.bot
        if bot.connection is not connection:
            return
        bot.connection = None
        if bot.seats:
            for seat in bot.seats.values():
                seat.match._note("disconnect", seat.index,
                                 f"stream ended; {self.reconnect_grace_s:g} s to reconnect")
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

    def route(self, connection: BotConnection, message: arena_pb2.BotMessage) -> None:
        """Hand a bot's answer to the seat waiting for it, or tell the bot why not."""
        kind = message.WhichOneof("body")
        if kind == "rotation":
            match_id, request_id = message.rotation.match_id, message.rotation.request_id
            payload: Any = message.rotation.rotate
            expected = "rotation"
        elif kind == "action":
            match_id, request_id = message.action.match_id, message.action.request_id
            payload = message.action.action
            expected = "decision"
        else:
            text = ("Hello is sent once, first" if kind == "hello"
                    else "a BotMessage needs a body: rotation or action")
            connection.send(arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
                code=arena_pb2.ERROR_CODE_BAD_MESSAGE, message=text)))
            return
        seat = connection.bot.seats.get(match_id)
        if seat is None:
            connection.send(arena_pb2.RefereeMessage(answer_result=arena_pb2.AnswerResult(
                match_id=match_id, request_id=request_id,
                status=arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH,
                reason=f"you are not playing a match with id {match_id!r}")))
            return
        request = seat.open
        if request is None or request.request_id != request_id or request.kind != expected:
            why = (f"request {request_id} is not open (already answered, timed out, or "
                   f"never sent)")
            if request is not None:
                why += f"; the open request is {request.request_id} ({request.kind})"
            seat.match._answer_result(seat, request_id, arena_pb2.ANSWER_STATUS_STALE, why)
            return
        seat.deliver((payload, time.monotonic()))

    # ----- matches ------------------------------------------------------------------------

    def create_match(self, bot_names: Sequence[str], seed: int | None = None,
                     time_control: TimeControl | None = None, *,
                     absent: Collection[str] = (), absent_ok: bool = False,
                     meta: JSON | None = None) -> MatchRunner:
        """Start a match now. Seats of bots in ``absent`` (or, with ``absent_ok``, of bots not
        connected) forfeit from the first move and are played by the fallback: a tournament
        uses this so that a crashed or disqualified bot costs no time."""
        if not self.accepting:
            raise MatchRequestError("UNAVAILABLE", "the referee is shutting down")
        if not 2 <= len(bot_names) <= 5:
            raise MatchRequestError("INVALID_ARGUMENT",
                                    f"a match seats 2 to 5 bots, not {len(bot_names)}")
        if len(set(bot_names)) != len(bot_names):
            raise MatchRequestError("INVALID_ARGUMENT", "a bot can hold only one seat in a match")
        bots = []
        missing: set[str] = set()
        for name in bot_names:
            bot = self.bots.get(name)
            if bot is None:
                raise MatchRequestError("NOT_FOUND", f"no bot named {name!r} is registered")
            if name in absent or (absent_ok and bot.connection is None):
                missing.add(name)
                bots.append(bot)
                continue
            if bot.connection is None:
                raise MatchRequestError("FAILED_PRECONDITION", f"bot {name!r} is not connected")
            if bot.free_slots <= 0:
                raise MatchRequestError(
                    "FAILED_PRECONDITION", f"bot {name!r} is already playing "
                    f"{len(bot.seats)} matches, the most it accepts at once")
            bots.append(bot)
        tc = time_control or self.default_time_control
        for value, what in ((tc.decision_ms, "decision_ms"), (tc.time_bank_ms, "time_bank_ms")):
            if not 0 <= value <= MAX_DECISION_MS or (what == "decision_ms" and value < 1):
                raise MatchRequestError("INVALID_ARGUMENT", f"{what} {value} is out of range")
        if seed is None:
            seed = secrets.randbits(64)
        match_id = f"m-{secrets.token_hex(6)}"
        runner = MatchRunner(self, match_id, bots, seed, tc)
        runner.extra_meta = dict(meta or {})
        for seat in runner.seats:
            if seat.bot.name in missing:
                seat.absent = True
                runner.forfeit(seat, "absent: not connected or excluded when the match began")
            else:
                seat.bot.seats[match_id] = seat
        self.matches[match_id] = runner
        self._idle.clear()
        runner.task = asyncio.get_running_loop().create_task(runner.run(),
                                                             name=f"match {match_id}")
        return runner

    async def store_record(self, runner: MatchRunner) -> None:
        """Write the record atomically off the event loop; a reader never sees half of one."""
        if self.records_dir is None or runner.record is None:
            return
        path = self.records_dir / f"{runner.match_id}.json"
        await asyncio.to_thread(dump_record, runner.record, path)

    def match_finished(self, runner: MatchRunner) -> None:
        for callback in self.on_match_finished:
            callback(runner)
        if all(m.status is not MatchStatus.RUNNING for m in self.matches.values()):
            self._idle.set()

    def running(self) -> list[MatchRunner]:
        return [m for m in self.matches.values() if m.status is MatchStatus.RUNNING]

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop taking matches; let running ones finish for ``drain_s``, then abort the rest,
        each writing its (unfinished) record in full."""
        self.accepting = False
        if drain_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait_idle(), drain_s)
        tasks = [m.task for m in self.running() if m.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
