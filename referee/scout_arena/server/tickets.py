"""Matches a referee node hosts for its ladder, and the single-match tickets bots bring.

A ladder with nodes assigns a match to a node (`Referee.host_match`) before it tells the bots
where to play it (PROTOCOL.md §3.8). The node then holds the match *pending*: each seat's bot
opens a Play stream with its ticket as bearer token (or already has one open), and the match
starts once every seat's bot is connected, or at the join deadline with the missing seats
absent (they forfeit, as in a tournament). A ticket names one bot and one match and is good
until that match ends or is cancelled; tickets are keyed by their SHA-256 like tokens, so no
lookup compares a ticket's own bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..record import JSON
from .clock import TimeControl
from .connections import token_digest, tokens_equal


@dataclass(eq=False)
class PendingMatch:
    """A match assigned to this node whose bots are not all connected yet."""

    match_id: str
    seats: tuple[tuple[str, str], ...]
    """(bot name, ticket) by seat."""
    seed: int
    time_control: TimeControl
    meta: JSON | None = None
    timer: asyncio.TimerHandle | None = None

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.seats]


@dataclass(frozen=True, slots=True)
class Ticket:
    ticket: str
    bot_name: str
    match_id: str


@dataclass
class TicketBook:
    """The tickets of the matches this node holds (pending or running)."""

    _by_digest: dict[bytes, Ticket] = field(default_factory=dict)
    _by_match: dict[str, list[bytes]] = field(default_factory=dict)

    def issue(self, match_id: str, seats: Sequence[tuple[str, str]]) -> None:
        digests = []
        for name, ticket in seats:
            if not ticket:
                raise ValueError(f"seat of {name!r} has no ticket")
            digest = token_digest(ticket)
            held = self._by_digest.get(digest)
            if held is not None and held.match_id != match_id:
                raise ValueError("a ticket is already in use for another match")
            self._by_digest[digest] = Ticket(ticket, name, match_id)
            digests.append(digest)
        self._by_match[match_id] = digests

    def bot_for(self, ticket: str) -> str | None:
        """The bot a live ticket belongs to, or None."""
        if not ticket:
            return None
        held = self._by_digest.get(token_digest(ticket))
        if held is None or not tokens_equal(ticket, held.ticket):
            return None
        return held.bot_name

    def forget(self, match_id: str) -> None:
        """The match ended or was cancelled: its tickets open nothing any more."""
        for digest in self._by_match.pop(match_id, ()):
            self._by_digest.pop(digest, None)

    def __len__(self) -> int:
        return len(self._by_digest)
