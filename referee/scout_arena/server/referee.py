"""The referee: the parts that make it, and the life of its matches.

`Referee` composes one part per job: the bots it knows (`BotRegistry`), their live streams and
the routing of answers (`Streams`), the matches a ladder assigned to it and their tickets
(`AssignedMatches`), the records directory (`RecordStore`), the running and recently finished
matches (`MatchBook`), its metrics, the loop-lag clock and the turn gate. Its own job is the life
of a match: seat it, start it, hear that it ended, stop the rest on shutdown. It speaks to bots
only through its `Wire` (`convert`'s, given to it by whoever serves it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from scout_rules.protocol import TimeControl

from scout_arena.text import echo

from ..record import JSON, MatchRecord
from .book import DEFAULT_KEEP_FINISHED, DEFAULT_KEEP_RECORDS, MatchBook
from .clock import DEFAULT_TIME_CONTROL, check_time_control
from .connections import BotEntry, BotRegistry
from .errors import (
    ECHO_LIMIT,
    BotAtCapacity,
    BotNotConnected,
    InvalidBotName,
    InvalidTable,
    RefereeClosing,
    UnknownBot,
    has_control_characters,
)
from .events import Goodbye, MatchEndStatus, MatchStatus, Wire
from .looplag import LoopLag
from .match import MatchRunner
from .metrics import RefereeMetrics
from .records import RecordStore
from .streams import Streams
from .tickets import AssignedMatches, PendingMatch
from .turns import DEFAULT_PASS_BUDGET_MS, TurnGate

MAX_STRIKES = 3

log = logging.getLogger("scout_arena.referee")


class Referee:
    """Registered bots, their connections, running matches and a window of finished ones.

    ``wire`` serializes what the referee tells bots (`convert.ProtobufWire` for gRPC streams).
    ``keep_finished``: how many finished matches are still known (a small summary each);
    ``keep_records``: how many of their records stay in memory when there is no
    ``records_dir`` (with one, every record is read back from its file)."""

    def __init__(self, tokens: Mapping[str, str], *, wire: Wire,
                 records_dir: Path | None = None,
                 default_time_control: TimeControl = DEFAULT_TIME_CONTROL,
                 reconnect_grace_s: float = 10.0, max_strikes: int = MAX_STRIKES,
                 keep_finished: int = DEFAULT_KEEP_FINISHED,
                 keep_records: int = DEFAULT_KEEP_RECORDS,
                 pass_budget_ms: float = DEFAULT_PASS_BUDGET_MS) -> None:
        self.wire = wire
        self.bots = BotRegistry(tokens)
        self.records = RecordStore(records_dir)
        self.default_time_control = default_time_control
        self.max_strikes = max_strikes
        self.matches = MatchBook(keep_finished, 0 if records_dir is not None else keep_records)
        """Running matches (`MatchRunner`) and the finished ones kept (`KeptMatch`)."""
        self.accepting = True
        self._idle = asyncio.Event()
        self._idle.set()
        self.on_match_finished: list[Callable[[MatchRunner], None]] = []
        self.metrics = RefereeMetrics()
        """This referee's Prometheus metrics (`metrics`), served by `serve_metrics`."""
        self.loop_lag = LoopLag(lambda: bool(self.matches.running), self.metrics.loop_lag.observe)
        """How far behind the loop runs, credited to answers read late (`looplag`)."""
        self.turns = TurnGate(pass_budget_ms)
        """Keeps each loop pass short under load, for every call that is not a match's
        (`turns`)."""
        self.metrics.count_deferred_turns(lambda: self.turns.deferred)
        self.metrics.waiting_turns.set_function(lambda: float(self.turns.waiting))
        self.metrics.count_running_matches(lambda: len(self.matches.running))
        self.assigned = AssignedMatches(self.bots, self._start_assigned)
        """Matches a ladder assigned to this referee (a node), `host_match`."""
        self.streams = Streams(self.bots, wire, self.metrics, self.loop_lag, reconnect_grace_s,
                               then=self.assigned.bot_connected)
        """The bots' live streams; answers come in through `Streams.route`."""

    def register(self, name: str, token: str) -> BotEntry:
        return self.bots.register(name, token)

    async def authenticate(self, token: str) -> BotEntry | None:
        """The bot of a token, or of a live ticket of a match this node hosts."""
        name = self.assigned.tickets.bot_for(token)
        if name is not None:
            return self.bots.entry(name)
        return await self.bots.authenticate(token)

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
                                     f"got {echo(name, ECHO_LIMIT)}")
            bot = self.bots.get(name)
            if bot is None:
                raise UnknownBot(f"no bot named {echo(name, ECHO_LIMIT)} is registered")
            if name in absent or (absent_ok and bot.connection is None):
                missing.add(name)
                bots.append(bot)
                continue
            if bot.connection is None:
                raise BotNotConnected(f"bot {echo(name, ECHO_LIMIT)} is not connected")
            if bot.free_slots <= 0:
                raise BotAtCapacity(f"bot {echo(name, ECHO_LIMIT)} is already playing "
                                    f"{len(bot.seats)} matches, the most it accepts at once")
            bots.append(bot)
        tc = time_control or self.default_time_control
        check_time_control(tc)
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
        await self.records.store(match)

    def match_finished(self, match: MatchRunner) -> None:
        self.assigned.tickets.forget(match.match_id)
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
        return await self.records.find(match_id, self.matches.get(match_id))

    # ----- matches a ladder assigns (this referee is a node) -------------------------------

    def host_match(self, match_id: str, seats: Sequence[tuple[str, str]], seed: int,
                   time_control: TimeControl, join_timeout_s: float,
                   meta: JSON | None = None) -> None:
        """Hold an assigned match until its bots are connected (`AssignedMatches.hold`).
        Raises `MatchRequestError` when it cannot be held."""
        if not self.accepting:
            raise RefereeClosing("the referee is shutting down")
        if self.matches.get(match_id) is not None:
            raise InvalidTable(f"match {match_id} is held here already")
        self.assigned.hold(match_id, seats, seed, time_control, join_timeout_s, meta)

    def _start_assigned(self, pending: PendingMatch) -> None:
        self.create_match(pending.names, pending.seed, pending.time_control, absent_ok=True,
                          meta=pending.meta, match_id=pending.match_id)

    def cancel_match(self, match_id: str, reason: str, voided: bool = False) -> bool:
        """Stop an assigned match without a result: a pending one is dropped, a running one
        aborted (its record is written, status aborted; its seats are told ``reason``, the
        match VOIDED when the ladder ``voided`` it, else ABORTED). False when it is not held
        here."""
        if self.assigned.cancel(match_id, reason):
            return True
        match = self.matches.running.get(match_id)
        status = MatchEndStatus.VOIDED if voided else MatchEndStatus.ABORTED
        if match is None or not match.cancel(reason, status):
            return False
        log.info("match %s cancelled: %s", match_id, reason)
        return True

    # ----- stopping -----------------------------------------------------------------------

    async def say_goodbye(self, goodbye: Goodbye, wait_s: float) -> None:
        """Take no more matches; tell every connected bot ``goodbye`` (`Streams.say_goodbye`)."""
        self.accepting = False
        await self.streams.say_goodbye(goodbye, wait_s)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop taking matches; let running ones finish for ``drain_s``, then abort the rest,
        each writing its (unfinished) record in full."""
        self.accepting = False
        self.assigned.abandon_all("the referee is shutting down")
        if drain_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait_idle(), drain_s)
        running = self.running()
        tasks = [m.task for m in running if m.task is not None]
        reason = "the referee shut down before the match ended" + (
            f" (it drained for {drain_s:g} s)" if drain_s > 0 else " (it did not drain)")
        for match in running:
            match.cancel(reason)
        await asyncio.gather(*tasks, return_exceptions=True)
