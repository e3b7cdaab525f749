"""The bots the referee knows: their tokens, their live stream (if any) and their seats.

A bot is known by its token, given when the referee starts or registered later, or vouched for
by an `Authenticator` (the ladder's, which checks its database). A connection is one Play
stream; what the referee says to the bot goes into its outbox as serialized messages and the
stream's writer drains it, so the referee never awaits a slow client.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .match import Seat

Authenticator = Callable[[str], Awaitable[str | None]]
"""A token's bot name, or None: for tokens the referee was not given itself."""


class BotConnection:
    """One live Play stream of a bot, with what it said in its Hello."""

    def __init__(self, bot: BotEntry, session_id: str, max_matches: int, version: str) -> None:
        self.bot = bot
        self.session_id = session_id
        self.max_matches = max_matches
        self.version = version
        self.outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.superseded = False
        self.accepts_batches = False
        self.handler_task: asyncio.Task[Any] | None = None

    def send(self, message: bytes) -> None:
        self.outbox.put_nowait(message)

    def close(self) -> None:
        """Let the writer stop after what is already queued."""
        self.outbox.put_nowait(None)


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
        """How many more matches the bot takes now (none while it is not connected)."""
        if self.connection is None:
            return 0
        return self.connection.max_matches - len(self.seats)


class BotRegistry:
    """Bots by name and by token, in the order the referee first heard of them."""

    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self._by_name: dict[str, BotEntry] = {}
        self._by_token: dict[str, BotEntry] = {}
        self.authenticator: Authenticator | None = None
        for name, token in (tokens or {}).items():
            self.register(name, token)

    def __iter__(self) -> Iterator[BotEntry]:
        return iter(self._by_name.values())

    def get(self, name: str) -> BotEntry | None:
        return self._by_name.get(name)

    def register(self, name: str, token: str) -> BotEntry:
        """Add a bot, or give a known one a new token (the old token stops working)."""
        if not name or not token:
            raise ValueError("a bot needs a name and a token")
        if token in self._by_token and self._by_token[token].name != name:
            raise ValueError(f"token of bot {name!r} is already used by another bot")
        entry = self._by_name.get(name)
        if entry is None:
            entry = self._by_name[name] = BotEntry(name, token)
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
        """The bot a token belongs to: the tokens given, else the ``authenticator`` (which may
        look a hash up in a database, off the event loop)."""
        if not token:
            return None
        entry = self.bot_for_token(token)
        if entry is not None or self.authenticator is None:
            return entry
        name = await self.authenticator(token)
        if name is None:
            return None
        entry = self._by_name.get(name)
        if entry is None:
            entry = self._by_name[name] = BotEntry(name, token="")
        return entry
