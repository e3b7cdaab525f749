"""Liveness and readiness of one server, as probes see them (docs/deploy.md, "Probes").

*Live*: the process is worth keeping: its grpc server is not found dead (`hardening`) and its
event loop turns (a loop stuck for `LOOP_STALL_S` answers nothing). A supervisor restarts a
server that is not live. *Ready*: it can do its job now: every named check passes (the
ladder's database answers, a node is attached to its ladder). A server that is live but not
ready is left running and sent no new work; it becomes ready again by itself.

gRPC health (the server as a whole, "", and its services) says SERVING exactly when the server
is ready and not stopping; the HTTP ``/livez`` and ``/readyz`` beside the metrics
(`metrics_http`) read the same state from their own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..text import brief

log = logging.getLogger("scout_arena.health")

LOOP_TICK_S = 1.0
"""How often the event loop notes that it turns."""
LOOP_STALL_S = 10.0
"""An event loop that has not turned for this long is not live."""
CHECK_TIMEOUT_S = 5.0
"""A readiness check that takes longer than this fails (a database that hangs is not ready)."""

Check = Callable[[], Awaitable[str | None]]
"""A readiness check: None when it passes, else the problem in a few words."""


class Reporter(Protocol):
    """Where readiness goes: the grpc health servicer of a `Listener`."""

    async def report(self, serving: bool) -> None: ...


class Health:
    """The live and ready state of one server; `set_problem` and the checks `watch` runs
    change readiness, and each change is reported to ``reporter`` (gRPC health)."""

    def __init__(self, reporter: Reporter, dead: Callable[[], str | None]) -> None:
        self._reporter = reporter
        self._dead = dead
        self._problems: dict[str, str] = {}
        self._tick = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []
        self._lock = asyncio.Lock()
        self._started = False
        self.stopping = False
        """Set by `stop`: never SERVING again, whatever the checks say."""

    # Read from any thread (the HTTP probes): plain reads of values the loop replaces whole.

    def live_problem(self) -> str | None:
        """Why the server is not live, or None."""
        dead = self._dead()
        if dead:
            return f"the grpc server is dead ({dead})"
        stalled = time.monotonic() - self._tick
        if self._started and stalled > LOOP_STALL_S:
            return f"the event loop has not turned for {stalled:.0f} s"
        return None

    def ready_problem(self) -> str | None:
        """Why the server is not ready, or None."""
        if self.stopping:
            return "stopping"
        if not self._started:
            return "starting"
        live = self.live_problem()
        if live is not None:
            return live
        problems = dict(self._problems)
        if problems:
            return "; ".join(f"{name}: {problem}" for name, problem in sorted(problems.items()))
        return None

    @property
    def ready(self) -> bool:
        return self.ready_problem() is None

    async def start(self) -> None:
        """Start the loop's tick, and report the readiness known now (problems set before
        the server started included)."""
        self._started = True
        self._tick = time.monotonic()
        self._tasks.append(asyncio.create_task(self._ticking(), name="health tick"))
        await self._report()

    async def set_problem(self, name: str, problem: str | None) -> None:
        """Check ``name`` now fails with ``problem`` (None: it passes)."""
        before = self._problems.get(name)
        if problem is None:
            self._problems.pop(name, None)
        else:
            self._problems[name] = problem
        if before != problem:
            if problem is None:
                log.warning("ready again: %s passes", name)
            else:
                log.warning("not ready: %s: %s", name, problem)
            if self._started:
                await self._report()

    def watch(self, name: str, check: Check, every_s: float) -> None:
        """Run ``check`` every ``every_s`` seconds (bounded by `CHECK_TIMEOUT_S`) until
        `stop`; its answer is the problem of ``name``."""
        self._tasks.append(asyncio.create_task(self._watching(name, check, every_s),
                                               name=f"health check {name}"))

    async def stop(self) -> None:
        """Not ready from now on (the server is stopping), checks stopped."""
        self.stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _report(self) -> None:
        async with self._lock:
            if not self.stopping:
                await self._reporter.report(serving=self.ready)

    async def _ticking(self) -> None:
        while True:
            self._tick = time.monotonic()
            await asyncio.sleep(LOOP_TICK_S)

    async def _watching(self, name: str, check: Check, every_s: float) -> None:
        while True:
            try:
                problem = await asyncio.wait_for(check(), CHECK_TIMEOUT_S)
            except TimeoutError:
                problem = f"no answer within {CHECK_TIMEOUT_S:g} s"
            except Exception as exc:  # a check that fails is a problem, not a dead watcher
                problem = brief(exc)
            await self.set_problem(name, problem)
            await asyncio.sleep(every_s)
