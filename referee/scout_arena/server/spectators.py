"""What spectators of one match see: its public events, from the start, then live ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from .events import SpectatorEvent


class Spectators:
    """The public events of one match, kept for every spectator who comes (WatchMatch) and
    followed live until the match is over. The event spectators wait on is made only while
    someone watches."""

    __slots__ = ("_changed", "closed", "log")

    def __init__(self) -> None:
        self.log: list[SpectatorEvent] = []
        self._changed: asyncio.Event | None = None
        """Set (and dropped) at the next public event."""
        self.closed = False
        """Set just before the last event is published (once the record is stored)."""

    def publish(self, event: SpectatorEvent) -> None:
        self.log.append(event)
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()

    async def follow(self) -> AsyncIterator[SpectatorEvent]:
        """Every event so far, then each as it comes, until the last one."""
        sent = 0
        while True:
            changed = self._changed
            if changed is None:
                changed = self._changed = asyncio.Event()
            while sent < len(self.log):
                yield self.log[sent]
                sent += 1
            if self.closed:
                return
            await changed.wait()
