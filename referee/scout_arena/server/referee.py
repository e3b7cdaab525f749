"""The referee: the bots it knows, their live streams, its running matches and recent ones.

Streams come and go through `attach`/`detach` (a newer stream of a bot supersedes the older
one; a bot that stays away past the reconnect grace forfeits its seats); answers come in
through `route`; matches start with `create_match` and store their records here. Finished
matches are kept as small summaries in a bounded window (`book`); their records are read back
from the records directory. It speaks
to bots only through its `Wire` (`convert`, given by the server that carries it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from ..record import JSON, MatchRecord, RecordError, load_record, record_bytes, write_record_bytes
from .book import DEFAULT_KEEP_FINISHED, DEFAULT_KEEP_RECORDS, MatchBook, is_record_id
from .clock import DEFAULT_TIME_CONTROL, TimeControl
from .connections import BotConnection, BotEntry, BotRegistry
from .errors import (
    BotAtCapacity,
    BotNotConnected,
    InvalidBotName,
    InvalidTable,
    RefereeClosing,
    UnknownBot,
    has_control_characters,
    quoted,
)
from .events import Answer, AnswerJudged, Goodbye, MatchStatus, Verdict, Welcome, Wire
from .looplag import LoopLag
from .match import MatchRunner, OpenRequest
from .metrics import RefereeMetrics
from .tickets import PendingMatch, TicketBook
from .turns import DEFAULT_PASS_BUDGET_MS, TurnGate

MAX_STRIKES = 3

log = logging.getLogger("scout_arena.referee")


@functools.cache
def record_writer() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that writes record files, for every referee of the process. One, not
    asyncio's pool: a thread that wakes needs the interpreter lock back from the event loop,
    and on a busy machine every hand-over costs the loop more than the write itself. With
    asyncio's pool (up to 6 threads here) the referee made 10,500-10,800 decisions/s at 100
    matches (bench/referee.py --quick) against 11,700-12,000 with no thread at all; with one
    thread and the JSON made on the loop, p99 was 13.2 and 15.1 ms in two runs, against 17.3
    and 17.5 with the pool. Records are written in the order their matches ended."""
    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="scout-records")


_CHOICE = {"rotation": "a RotationChoice", "decision": "an ActionChoice"}


def stale_reason(request_id: int, kind: str, open_request: OpenRequest | None) -> str:
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


class Referee:
    """Registered bots, their connections, running matches and a window of finished ones.

    ``keep_finished``: how many finished matches are still known (a small summary each);
    ``keep_records``: how many of their records stay in memory when there is no
    ``records_dir`` (with one, every record is read back from its file)."""

    def __init__(self, tokens: Mapping[str, str], *, records_dir: Path | None = None,
                 default_time_control: TimeControl = DEFAULT_TIME_CONTROL,
                 reconnect_grace_s: float = 10.0, max_strikes: int = MAX_STRIKES,
                 keep_finished: int = DEFAULT_KEEP_FINISHED,
                 keep_records: int = DEFAULT_KEEP_RECORDS,
                 pass_budget_ms: float = DEFAULT_PASS_BUDGET_MS) -> None:
        self.bots = BotRegistry(tokens)
        self.records_dir = records_dir
        self.default_time_control = default_time_control
        self.reconnect_grace_s = reconnect_grace_s
        self.max_strikes = max_strikes
        self.matches = MatchBook(keep_finished, 0 if records_dir is not None else keep_records)
        """Running matches (`MatchRunner`) and the finished ones kept (`FinishedMatch`)."""
        self.farewell: bytes | None = None
        """The serialized Goodbye once the referee closes its streams: new ones get it too."""
        self.accepting = True
        self._idle = asyncio.Event()
        self._idle.set()
        self._wire: Wire | None = None
        self.on_match_finished: list[Callable[[MatchRunner], None]] = []
        self.on_connect: list[Callable[[BotEntry], None]] = []
        self.metrics = RefereeMetrics()
        """This referee's Prometheus metrics (`metrics`), served by `serve_metrics`."""
        self.loop_lag = LoopLag(lambda: bool(self.matches.running), self.metrics.loop_lag.observe)
        """How far behind the loop runs, credited to answers read late (`looplag`)."""
        self.turns = TurnGate(pass_budget_ms)
        self.metrics.count_deferred_turns(lambda: self.turns.deferred)
        """Keeps each loop pass short under load, for every call that is not a match's
        (`turns`)."""
        self.metrics.waiting_turns.set_function(lambda: float(self.turns.waiting))
        self.metrics.count_running_matches(lambda: len(self.matches.running))
        self.tickets = TicketBook()
        """Tickets of the matches a ladder assigned to this referee (a node), `host_match`."""
        self.pending: dict[str, PendingMatch] = {}
        """Assigned matches waiting for their bots' streams."""
        self.on_hosting_failed: list[Callable[[str, str], None]] = []
        """Called (match id, why) when an assigned match could not start at all."""

    @property
    def wire(self) -> Wire:
        if self._wire is None:
            raise RuntimeError("the referee has no wire to its bots yet: serve it with a "
                               "RefereeServer before it starts matches")
        return self._wire

    @wire.setter
    def wire(self, wire: Wire) -> None:
        self._wire = wire

    @property
    def has_wire(self) -> bool:
        return self._wire is not None

    def register(self, name: str, token: str) -> BotEntry:
        return self.bots.register(name, token)

    async def authenticate(self, token: str) -> BotEntry | None:
        """The bot of a token, or of a live ticket of a match this node hosts."""
        name = self.tickets.bot_for(token)
        if name is not None:
            return self.bots.entry(name)
        return await self.bots.authenticate(token)

    # ----- connections --------------------------------------------------------------------

    def attach(self, connection: BotConnection) -> bool:
        """Welcome ``connection`` and make it its bot's live one, superseding any older
        stream, and resync every running match of the bot. Returns whether running matches
        were resumed."""
        bot = connection.bot
        resumed = bool(bot.seats)
        connection.send(self.wire.encode(Welcome(bot.name, connection.session_id, resumed)))
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
            seat.match.resync(seat)
        for callback in self.on_connect:
            callback(bot)
        for pending in [p for p in self.pending.values() if bot.name in p.names]:
            self._start_if_ready(pending)
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
            connection.send(self.wire.encode(AnswerJudged(
                match_id, request_id, Verdict.UNKNOWN_MATCH,
                f"you are not playing a match with id {match_id!r}")))
            return
        request = seat.open
        if request is None or request.request_id != request_id or request.kind != answer.kind:
            seat.match.judge(seat, request_id, Verdict.STALE,
                             stale_reason(request_id, answer.kind, request))
            return
        seat.deliver((answer, time.monotonic() if received_at is None else received_at,
                      self.loop_lag.lag()))

    # ----- matches ------------------------------------------------------------------------

    def create_match(self, bot_names: Sequence[str], seed: int | None = None,
                     time_control: TimeControl | None = None, *,
                     absent: Collection[str] = (), absent_ok: bool = False,
                     meta: JSON | None = None, match_id: str | None = None) -> MatchRunner:
        """Start a match now. Seats of bots in ``absent`` (or, with ``absent_ok``, of bots not
        connected) forfeit from the first move and are played by the fallback: a tournament
        uses this so that a crashed or disqualified bot costs no time."""
        if not self.accepting:
            raise RefereeClosing("the referee is shutting down")
        if not 2 <= len(bot_names) <= 5:
            raise InvalidTable(f"a match seats 2 to 5 bots, not {len(bot_names)}")
        if len(set(bot_names)) != len(bot_names):
            raise InvalidTable("a bot can hold only one seat in a match")
        bots = []
        missing: set[str] = set()
        for index, name in enumerate(bot_names):
            if has_control_characters(name):
                raise InvalidBotName(f"seat {index}: a bot name has no control characters, "
                                     f"got {quoted(name)}")
            bot = self.bots.get(name)
            if bot is None:
                raise UnknownBot(f"no bot named {quoted(name)} is registered")
            if name in absent or (absent_ok and bot.connection is None):
                missing.add(name)
                bots.append(bot)
                continue
            if bot.connection is None:
                raise BotNotConnected(f"bot {quoted(name)} is not connected")
            if bot.free_slots <= 0:
                raise BotAtCapacity(f"bot {quoted(name)} is already playing {len(bot.seats)} "
                                    "matches, the most it accepts at once")
            bots.append(bot)
        tc = time_control or self.default_time_control
        tc.check()
        if seed is None:
            seed = secrets.randbits(64)
        if match_id is None:
            match_id = f"m-{secrets.token_hex(6)}"
        elif self.matches.get(match_id) is not None:
            raise InvalidTable(f"match {match_id} exists already")
        runner = MatchRunner(self, match_id, bots, seed, tc, self.wire.for_match(match_id),
                             meta)
        for seat in runner.seats:
            if seat.bot.name in missing:
                seat.absent = True
                runner.forfeit(seat, "absent: not connected or excluded when the match began")
            else:
                seat.bot.seats[match_id] = seat
        self.matches[match_id] = runner
        self._idle.clear()
        self.loop_lag.keep_running()
        runner.task = asyncio.get_running_loop().create_task(runner.run(),
                                                             name=f"match {match_id}")
        return runner

    async def store_record(self, match: MatchRunner) -> None:
        """Write the record atomically off the event loop; a reader never sees half of one.
        Its JSON is made here (the interpreter's work, held against the loop wherever it runs)
        and only the file's system calls go to the writer thread (`record_writer`)."""
        if self.records_dir is None or match.record is None:
            return
        path = self.records_dir / f"{match.match_id}.json"
        data = record_bytes(match.record)
        await asyncio.get_running_loop().run_in_executor(record_writer(), write_record_bytes,
                                                         data, path)

    # ----- matches a ladder assigns (this referee is a node) -------------------------------

    def host_match(self, match_id: str, seats: Sequence[tuple[str, str]], seed: int,
                   time_control: TimeControl, join_timeout_s: float,
                   meta: JSON | None = None) -> None:
        """Hold an assigned match until every seat's bot is connected (each brings its
        ticket, or is connected already), then start it; at ``join_timeout_s`` start it with
        the missing seats absent. Raises `MatchRequestError` when it cannot be held."""
        if not self.accepting:
            raise RefereeClosing("the referee is shutting down")
        if match_id in self.pending or self.matches.get(match_id) is not None:
            raise InvalidTable(f"match {match_id} is held here already")
        if not 2 <= len(seats) <= 5:
            raise InvalidTable(f"a match seats 2 to 5 bots, not {len(seats)}")
        if len({name for name, _ in seats}) != len(seats):
            raise InvalidTable("a bot can hold only one seat in a match")
        for index, (name, _) in enumerate(seats):
            if not name or has_control_characters(name):
                raise InvalidBotName(f"seat {index}: invalid bot name {quoted(name)}")
        time_control.check()
        try:
            self.tickets.issue(match_id, seats)
        except ValueError as exc:
            raise InvalidTable(str(exc)) from None
        pending = PendingMatch(match_id, tuple(seats), seed, time_control, meta)
        self.pending[match_id] = pending
        pending.timer = asyncio.get_running_loop().call_later(
            join_timeout_s, self._start_pending, pending, True)
        self._start_if_ready(pending)

    def _start_if_ready(self, pending: PendingMatch) -> None:
        ready = all((bot := self.bots.get(name)) is not None and bot.connection is not None
                    for name in pending.names)
        if ready:
            self._start_pending(pending, False)

    def _start_pending(self, pending: PendingMatch, timed_out: bool) -> None:
        if self.pending.get(pending.match_id) is not pending:
            return
        del self.pending[pending.match_id]
        if pending.timer is not None:
            pending.timer.cancel()
        names = pending.names
        for name in names:
            self.bots.entry(name)
        try:
            self.create_match(names, pending.seed, pending.time_control, absent_ok=True,
                              meta=pending.meta, match_id=pending.match_id)
        except Exception as exc:
            self.tickets.forget(pending.match_id)
            log.warning("assigned match %s could not start: %s", pending.match_id, exc)
            for callback in self.on_hosting_failed:
                callback(pending.match_id, str(exc))
            return
        if timed_out:
            missing = [n for n in names if (b := self.bots.get(n)) is None or b.connection is None]
            log.info("assigned match %s started without %s (not connected in time)",
                     pending.match_id, ", ".join(missing))

    def cancel_match(self, match_id: str, reason: str) -> bool:
        """Stop an assigned match without a result: a pending one is dropped, a running one
        aborted (its record is written, status aborted). False when it is not held here."""
        pending = self.pending.pop(match_id, None)
        if pending is not None:
            if pending.timer is not None:
                pending.timer.cancel()
            self.tickets.forget(match_id)
            log.info("assigned match %s cancelled before it began: %s", match_id, reason)
            return True
        match = self.matches.running.get(match_id)
        if match is None or not match.cancel():
            return False
        log.info("match %s cancelled: %s", match_id, reason)
        return True

    def match_finished(self, match: MatchRunner) -> None:
        self.tickets.forget(match.match_id)
        try:
            for callback in self.on_match_finished:
                callback(match)
        finally:  # a failing callback must not keep the match (and its runner) running
            self.matches.finish(match)
            if not self.matches.running:
                self._idle.set()

    def running(self) -> list[MatchRunner]:
        return [m for m in self.matches.running.values() if m.status is MatchStatus.RUNNING]

    async def find_record(self, match_id: str) -> MatchRecord | None:
        """The record of a match that has ended: from memory while it is kept there, else
        from the records directory (also for matches of an earlier run); None if neither has
        it."""
        match = self.matches.get(match_id)
        if match is not None and match.record is not None and \
                match.status is not MatchStatus.RUNNING:
            return match.record
        if self.records_dir is None or not is_record_id(match_id):
            return None
        path = self.records_dir / f"{match_id}.json"
        try:
            return await asyncio.to_thread(load_record, path)
        except FileNotFoundError:
            return None
        except (OSError, RecordError, ValueError) as exc:
            log.warning("cannot read the record %s: %s", path, exc)
            return None

    async def say_goodbye(self, goodbye: Goodbye, wait_s: float) -> None:
        """Tell every connected bot ``goodbye`` as its stream's last message, and any stream
        that opens from now on too; wait up to ``wait_s`` for those streams to end (each ends
        with OK once its Goodbye is written)."""
        self.accepting = False
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

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop taking matches; let running ones finish for ``drain_s``, then abort the rest,
        each writing its (unfinished) record in full."""
        self.accepting = False
        if drain_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait_idle(), drain_s)
        running = self.running()
        tasks = [m.task for m in running if m.task is not None]
        for match in running:
            match.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
