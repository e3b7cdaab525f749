"""Match turns share the event loop in short passes, so nothing else waits behind them.

A busy referee has a turn to play in nearly every match at once: each answer that came in
makes its seat's turn due, and one pass of the event loop reads every answer that is ready. With 300
matches whose bots answer at once, a pass runs 300 turns (tens of milliseconds of CPU), and
anything else on the loop (a `CreateMatch`, a health check, a new bot's Hello, the loop-lag
tick) waits one such pass per step it takes. grpc.aio needs several steps per call, so an
organiser saw seconds.

The gate lets turns into a pass until they have taken `budget_s` of it; the other matches wait
in arrival order (first come, first served) and go on in the next passes. A pass stays short,
so every other call gets through in a few milliseconds. The budget is time, not a count,
because a turn's cost varies with how bots connect: about 0.2 ms when many matches share a few
streams (their messages go out in bundles), 0.4 ms and more when every bot has its own
connection. A turn's cost is measured as everything its pass did, spread over its turns: the
reads and writes a turn brings about are part of it. Turns timed alone let passes grow with
the reads and writes they bring (tried: CreateMatch p99 doubled).

Short passes can cost throughput where every bot has its own connection: 4,000 bots in 1,000
matches made 1,259 decisions/s with the budget and 1,765 without (`bench/soak.py`) when each
turn woke its match's task; run where the answers are read, they make 2,447 with it. No bot
drew on its bank either way. The wait never costs a bot time: its answer's arrival was noted
before its turn waits here (`Seat.deliver`, `clock`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger("scout_arena.referee")

DEFAULT_PASS_BUDGET_MS = 2.0
"""Measured against 1.5 and 3 ms (`bench/soak.py`, 10,000 bots, 300 matches: CreateMatch p99
55, 59 and 77 ms) and against the bundles of `bench/referee.py` at 100 matches, which shrink
below 2 ms (0.30 messages to bots per decision at 1.5 ms, 0.16 at 2 ms, 0.12 at 3 ms)."""

NO_PASS_BUDGET_MS = 1000.0
"""A budget no pass reaches: for a referee that only plays its own matches as fast as it can
(a local tournament), where no organiser's call waits on the loop."""

_FIRST_TURN_S = 0.0003
"""A turn's cost assumed until the gate has measured one."""
_SMOOTHING = 0.2


class TurnGate:
    """Decides which match turns run in the current event-loop pass, while the pass has
    budget, and queues the rest in order.

    A turn (`Seat.take_turn`) is due when a seat's answer is delivered or its timer goes off;
    whatever makes it due goes through `wake`, which runs it at once while this pass has room
    (in the task that read the answer: no match task to wake, no pass to wait for) and
    otherwise queues it. `_next_pass` runs once in each pass that follows one with turns
    (`call_soon`), so an idle gate costs nothing: it runs as many waiting turns as the budget
    has room for, by the cost of a turn measured over the passes before."""

    def __init__(self, budget_ms: float = DEFAULT_PASS_BUDGET_MS,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if not budget_ms > 0:
            raise ValueError(f"a pass budget is more than 0 ms, not {budget_ms}")
        self.budget_s = budget_ms / 1000
        self.deferred = 0
        """Turns that had to wait for a later pass, so far: how saturated the loop is (a plain
        count, read by the metrics when scraped; a turn past the budget costs no lock)."""
        self._clock = clock
        self._started = 0.0
        self._turns = 0
        """Turns run in this pass so far (since `_next_pass` last ran)."""
        self.turn_s = _FIRST_TURN_S
        """What one turn costs the loop, smoothed over recent passes."""
        self._room = self._room_for(self.turn_s)
        self._scheduled = False
        self._running = False
        self._waiting: deque[Callable[[], None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _room_for(self, turn_s: float) -> int:
        return max(1, int(self.budget_s / turn_s)) if turn_s > 0 else 1 << 30

    def wake(self, turn: Callable[[], None]) -> None:
        """Run ``turn`` now if this pass has room, else once a later pass has: turns run in
        the order they came. A turn made due by another turn waits for the next pass."""
        if self._waiting or self._turns >= self._room or self._running:
            self._waiting.append(turn)
            self.deferred += 1
        else:
            if self._turns == 0:
                self._started = self._clock()
            self._turns += 1
            self._run(turn)
        self._schedule()

    def _run(self, turn: Callable[[], None]) -> None:
        """A turn that raises (it should not: a match catches its own errors) is logged, and
        the gate goes on with the turns behind it."""
        self._running = True
        try:
            turn()
        except Exception:
            log.exception("a match turn raised; the turns behind it go on")
        finally:
            self._running = False

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._next_pass)

    def _next_pass(self) -> None:
        """Runs the next turns in line, as many as the budget has room for; they count
        against this pass, with the turns `wake` runs in it."""
        self._scheduled = False
        now = self._clock()
        if self._turns:
            # Everything since the first turn ran, spread over the turns: a cost estimate
            # that errs high (it includes the rest of the pass), so passes err short.
            cost = (now - self._started) / self._turns
            self.turn_s += (cost - self.turn_s) * _SMOOTHING
            self._room = self._room_for(self.turn_s)
        self._turns = 0
        self._started = now
        waiting = self._waiting
        while waiting and self._turns < self._room:
            self._turns += 1
            self._run(waiting.popleft())
        if self._turns or waiting:
            self._schedule()
