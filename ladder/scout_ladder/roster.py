"""Who the ladder's bots are and which of them can take a seat now.

The scheduler asks the roster for the idle bots; the roster asks its `PlayerSource` list who
can play at all (today: the bots connected to the ladder's referee). A source of bots that
play without a stream of their own is one more entry of `Roster.sources`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Set
from typing import Protocol

from scout_arena.server import RefereeFacade

from .repository import BotInfo, Repository


class PlayerSource(Protocol):
    """Bots that can play now."""

    def free_seats(self) -> Mapping[str, int]:
        """Bot name -> how many more matches it can take at once (0: busy). A bot missing
        from the mapping cannot play now."""
        ...


class ConnectedBots:
    """The bots with a stream to the ladder's referee."""

    def __init__(self, referee: RefereeFacade) -> None:
        self.referee = referee

    def free_seats(self) -> Mapping[str, int]:
        return self.referee.connected_bots()


class Roster:
    """The registered bots' owners and versions, which are not to be scheduled and why, and
    since when each has waited for a match."""

    def __init__(self, repo: Repository, sources: list[PlayerSource]) -> None:
        self.repo = repo
        self.sources = sources
        self.owners: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.unschedulable: dict[str, str] = {}
        """Bot name -> why it is not scheduled ("retired", "probation: ...", "its owner is
        suspended: ...", "paused: ...")."""
        self.idle_since: dict[str, float] = {}
        self.on_refresh: list[Callable[[list[BotInfo]], Awaitable[None]]] = []
        """Told every registered bot as read by each `refresh` (the hosting code)."""

    def _know(self, bot: BotInfo) -> None:
        self.owners[bot.name] = bot.owner
        self.versions[bot.name] = bot.version

    async def authenticate(self, token: str) -> str | None:
        """The name of the bot with this token; None for no bot, a retired one, or a hosted
        one."""
        bot = await asyncio.to_thread(self.repo.authenticate, token)
        if bot is None or bot.retired or bot.kind == "hosted":
            return None  # a hosted bot plays only in its sandbox, through its own socket
        self._know(bot)
        return bot.name

    async def refresh(self) -> None:
        """Reads every registered bot again (registrations, retirements, probations)."""
        bots = await asyncio.to_thread(self.repo.list_bots, True)
        unschedulable = {}
        for bot in bots:
            self._know(bot)
            reason = bot.unschedulable_reason  # retired, suspended owner, paused, no version
            if reason is not None:
                unschedulable[bot.name] = reason
            elif bot.probation_reason:
                unschedulable[bot.name] = f"probation: {bot.probation_reason}"
        self.unschedulable = unschedulable
        for hook in self.on_refresh:
            await hook(bots)

    def connected(self, name: str) -> None:
        self.idle_since.setdefault(name, time.monotonic())

    def free_seats(self) -> dict[str, int]:
        """Every bot some source says can play, with its free seats over all sources."""
        seats: dict[str, int] = {}
        for source in self.sources:
            for name, free in source.free_seats().items():
                seats[name] = seats.get(name, 0) + free
        return seats

    def schedulable(self, free_seats: Mapping[str, int]) -> dict[str, str]:
        """Bot name -> owner of the registered bots among ``free_seats`` that may be
        scheduled (busy or not)."""
        return {n: self.owners[n] for n in free_seats
                if n in self.owners and n not in self.unschedulable}

    def idle(self, held: Mapping[str, Set[str]]) -> list[str]:
        """The bots that can take a seat now: a free seat beyond the ``held`` ones (bot ->
        matches reserved for it), registered and schedulable."""
        return [name for name, free in self.free_seats().items()
                if free - len(held.get(name, ())) > 0 and name not in self.unschedulable
                and name in self.owners]

    def seated(self, names: list[str]) -> None:
        for n in names:
            self.idle_since.pop(n, None)

    def freed(self, names: list[str] | tuple[str, ...], now: float) -> None:
        for n in names:
            self.idle_since[n] = now
