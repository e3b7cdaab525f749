"""How far behind the referee's event loop runs: the part of an answer's time that was the
referee's on the way in.

The fair clock (`clock`) starts a request's time once its writer has handed it to the transport, so
time a request waits inside the referee is never the bot's. An answer has the same problem the
other way: it reaches the transport, then waits for the loop to read it, and a loop that is busy
(a burst of matches, a slow callback) reads it late. That wait is the referee's too. The loop
cannot see when bytes arrived, but it can see how late it runs: a tick every `TICK_S` notes how
late it fired, and `lag` says how far behind the loop is now (the overdue tick, or the last
one's lateness, whichever is more). An answer read while the loop is ``lag`` behind is credited
that much (never more than its whole wait), and a timeout whose timer itself fired late waits
that much longer for answers the loop has not read yet.

The tick runs only while a match does (`keep_running`), so an idle referee does no work.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

TICK_S = 0.005
"""How often the loop's lateness is sampled."""


class LoopLag:
    """The lateness of one event loop, sampled while ``active()`` says there is work."""

    def __init__(self, active: Callable[[], bool],
                 observe: Callable[[float], None] | None = None) -> None:
        """``observe`` is given each tick's lateness (the loop lag histogram, `metrics`)."""
        self._active = active
        self._observe = observe
        self._due = 0.0
        self._last = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def keep_running(self) -> None:
        """Start ticking (if not already): called whenever a match starts."""
        if self._handle is None:
            self._due = time.monotonic() + TICK_S
            self._handle = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        self._last = max(0.0, now - self._due)
        if self._observe is not None:
            self._observe(self._last)
        if not self._active():
            self._handle = None
            self._last = 0.0
            return
        self._due = now + TICK_S
        self._handle = asyncio.get_running_loop().call_later(TICK_S, self._tick)

    def lag(self) -> float:
        """Seconds the loop runs behind right now (0 when it keeps time, or is not ticking)."""
        if self._handle is None:
            return 0.0
        return max(self._last, time.monotonic() - self._due)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
