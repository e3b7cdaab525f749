"""What the ladder's jobs share while it runs: its stop and pause flags, its background tasks,
and its database calls, retried with backoff while the database fails for a transient reason.

Every repository call goes through ``asyncio.to_thread``, so no database call blocks the loop.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from scout_arena.text import brief

from .repository import is_transient

log = logging.getLogger("scout_ladder")

P = ParamSpec("P")
T = TypeVar("T")

RETRY_FIRST_S = 0.05
RETRY_MAX_S = 5.0


class GaveUp(Exception):
    """A retried database call was abandoned (the ladder is stopping)."""


@dataclass(eq=False)
class RunFlags:
    """Whether the ladder is stopping or paused, and the call that wakes its scheduler."""

    stopping: bool = False
    paused: bool = False
    """No new match starts (the ladder's local nodes are about to stop)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class Background:
    """The ladder's own tasks (results being stored, matches being started on nodes): each
    one's failure is logged, never "never retrieved", and `drain` waits for them all."""

    def __init__(self) -> None:
        self.pending: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[object, object, None], what: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        self.pending.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self.pending.discard(task)
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here, always: never "never retrieved"
        if exc is not None:
            log.error("%s failed: %s", task.get_name(), brief(exc), exc_info=exc)

    async def drain(self) -> None:
        """Waits for every pending task (they may spawn more), saying so while it takes."""
        waited = 0.0
        while self.pending:
            done, _ = await asyncio.wait(list(self.pending), timeout=10.0)
            if not done:
                waited += 10.0
                log.warning("stopping: still storing %d results after %.0f s (the database "
                            "is not answering); a second SIGTERM stops at once and leaves "
                            "them in flight", len(self.pending), waited)


class DatabaseCalls:
    """Repository calls in a thread, repeated with backoff for as long as they fail for a
    transient reason (the repository's writes are idempotent, so a repeat is safe even when a
    commit went through and only its answer was lost)."""

    def __init__(self, flags: RunFlags) -> None:
        self.flags = flags

    async def run(self, what: str, fn: Callable[P, T], *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """Retried until it succeeds or fails for good."""
        return await self._retry(what, functools.partial(fn, *args, **kwargs), False)

    async def run_unless_stopping(self, what: str, fn: Callable[P, T], *args: P.args,
                                  **kwargs: P.kwargs) -> T:
        """Retried like `run`, but `GaveUp` once the ladder is stopping."""
        return await self._retry(what, functools.partial(fn, *args, **kwargs), True)

    async def _retry(self, what: str, call: Callable[[], T], stoppable: bool) -> T:
        delay = RETRY_FIRST_S
        for attempt in itertools.count(1):
            try:
                return await asyncio.to_thread(call)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if stoppable and self.flags.stopping:
                    raise GaveUp(what) from exc
                log.warning("%s failed (attempt %d, next in %.2f s): %s", what, attempt, delay,
                            brief(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        raise AssertionError("unreachable")
