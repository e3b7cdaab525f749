"""The bots the referee knows: their tokens, their live stream (if any) and their seats.

A bot is known by its token, given when the referee starts or registered later, or vouched for
by an `Authenticator` (the ladder's, which checks its database). A connection is one Play
stream; what the referee says to the bot goes into its outbox as serialized messages and the
stream's writer drains it, so the referee never awaits a slow client.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .seat import Seat

Authenticator = Callable[[str], Awaitable[str | None]]
"""A token's bot name, or None: for tokens the referee was not given itself."""


def token_digest(token: str) -> bytes:
    """What the registry keys a token by: its SHA-256, so that no lookup compares the token's
    own bytes (whose early mismatch a timing attack could measure)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two tokens (any characters; `hmac.compare_digest` refuses
    str with non-ASCII characters, so the UTF-8 bytes are compared)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                               expected.encode("utf-8", "surrogateescape"))


class BotConnection:
    """One live Play stream of a bot, with what it said in its Hello."""

    def __init__(self, bot: BotEntry, session_id: str, max_matches: int, version: str) -> None:
        self.bot = bot
        self.session_id = session_id
        self.max_matches = max_matches
        self.version = version
        self.outbox = Outbox()
        self.superseded = False
        self.lean = False
        """Hello.lean: this stream goes without PublicEvents and AnswerResult{ACCEPTED}."""
        self.accepts_bundles = False
        """Hello.accepts_bundles: the writer may send what is queued as one RefereeBundle."""
        self.handler_task: asyncio.Task[None] | None = None
        self.said_goodbye = False
        """The writer has sent a Goodbye: the handler ends the call with OK."""

    def send(self, message: bytes | Handoff) -> None:
        self.outbox.put(message)

    def close(self) -> None:
        """Let the writer stop after what is already queued."""
        self.outbox.put(None)

    def say_goodbye(self, message: bytes) -> None:
        """Queue a Goodbye as the stream's last message; once the writer has sent it, the
        handler ends the call (see `ArenaServicer.Play`)."""
        self.outbox.put(GoodbyeMessage(message))


class GoodbyeMessage(bytes):
    """A serialized Goodbye in an outbox: the writer sends it, then the stream ends."""


class Handoff:
    """A serialized request in an outbox: the writer calls ``on_write`` once the transport has
    taken ``data`` (its write completed), which starts the request's clock (`SeatClock.start`)."""

    __slots__ = ("data", "on_write")

    def __init__(self, data: bytes, on_write: Callable[[], None]) -> None:
        self.data = data
        self.on_write = on_write


OutboxItem = bytes | Handoff | None
"""A serialized message, a request (`Handoff`), a Goodbye (`GoodbyeMessage`), or None: stop."""


class Outbox:
    """What the referee has queued for one stream, in order. The writer takes what has piled
    up while its last write was in flight in one go (`take`), so a stream that accepts bundles
    gets it in one message; a Goodbye or the stop (None) always comes alone."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[OutboxItem] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: OutboxItem) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._items)

    async def take(self, most: int = 1, most_bytes: int = 0) -> list[OutboxItem]:
        """The next item; with ``most`` > 1, every message queued behind it as well, up to
        ``most`` of them and (past the first) ``most_bytes`` of data, stopping before a Goodbye
        or the stop."""
        items = self._items
        while not items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        first = items.popleft()
        taken = [first]
        if most <= 1 or first is None or isinstance(first, GoodbyeMessage):
            return taken
        size = _size(first)
        while items and len(taken) < most:
            item = items[0]
            if item is None or isinstance(item, GoodbyeMessage):
                break
            size += _size(item)
            if size > most_bytes:
                break
            taken.append(items.popleft())
        return taken


def payload(item: bytes | Handoff) -> bytes:
    """The serialized message an outbox item carries (a request's own, for a `Handoff`)."""
    return item.data if isinstance(item, Handoff) else item


def _size(item: bytes | Handoff) -> int:
    return len(payload(item))


@dataclass(eq=False)
class BotEntry:
    """A registered bot: its token, its live connection (if any) and its seats in matches."""

    name: str
    token: str
    connection: BotConnection | None = None
    seats: dict[str, Seat] = field(default_factory=dict)
    grace_task: asyncio.Task[None] | None = None
    open_streams: int = 0
    """Play calls of this bot's token being handled now (from authentication to their end)."""

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
        self._by_token: dict[bytes, BotEntry] = {}
        """Keyed by `token_digest`."""
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
        digest = token_digest(token)
        if digest in self._by_token and self._by_token[digest].name != name:
            raise ValueError(f"token of bot {name!r} is already used by another bot")
        entry = self._by_name.get(name)
        if entry is None:
            entry = self._by_name[name] = BotEntry(name, token)
        else:
            if entry.token:
                self._by_token.pop(token_digest(entry.token), None)
            entry.token = token
        self._by_token[digest] = entry
        return entry

    def entry(self, name: str) -> BotEntry:
        """The bot of this name, known from now on if it was not (a bot vouched for by an
        authenticator or a ticket has no token here)."""
        entry = self._by_name.get(name)
        if entry is None:
            entry = self._by_name[name] = BotEntry(name, token="")
        return entry

    def bot_for_token(self, token: str) -> BotEntry | None:
        entry = self._by_token.get(token_digest(token))
        if entry is None:
            return None
        return entry if tokens_equal(token, entry.token) else None

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
        return self.entry(name)
