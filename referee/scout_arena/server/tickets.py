"""Matches a referee node hosts for its ladder, and the single-match tickets bots bring.

A ladder with nodes assigns a match to a node (`AssignedMatches.hold`) before it tells the bots
where to play it (PROTOCOL.md §3.8). The node then holds the match *pending*: each seat's bot
opens a Play stream with its ticket as bearer token (or already has one open), and the match
starts once every seat's bot is connected, or at the join deadline with the missing seats
absent (they forfeit, as in a tournament). A ticket names one bot and one match and is good
until that match ends or is cancelled; tickets are keyed by their SHA-256 like tokens, so no
lookup compares a ticket's own bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scout_rules.protocol import TimeControl

from scout_arena.text import echo

from ..record import JSON
from .clock import check_time_control
from .connections import BotEntry, BotRegistry, token_digest, tokens_equal
from .errors import ECHO_LIMIT, InvalidBotName, InvalidTable, has_control_characters

log = logging.getLogger("scout_arena.referee")


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


StartMatch = Callable[[PendingMatch], None]
"""Starts a held match now, its seats of bots not connected absent; raises when it cannot."""


class AssignedMatches:
    """The matches a ladder assigned to this referee (a node) that wait for their bots, and
    the tickets of those and of the running ones."""

    def __init__(self, bots: BotRegistry, start: StartMatch) -> None:
        self.bots = bots
        self._start = start
        self.tickets = TicketBook()
        self.pending: dict[str, PendingMatch] = {}
        """Assigned matches waiting for their bots' streams."""
        self.on_hosting_failed: list[Callable[[str, str], None]] = []
        """Called (match id, why) when an assigned match could not start at all."""

    def hold(self, match_id: str, seats: Sequence[tuple[str, str]], seed: int,
             time_control: TimeControl, join_timeout_s: float, meta: JSON | None = None) -> None:
        """Hold an assigned match until every seat's bot is connected (each brings its
        ticket, or is connected already), then start it; at ``join_timeout_s`` start it with
        the missing seats absent. Raises `MatchRequestError` when it cannot be held."""
        if match_id in self.pending:
            raise InvalidTable(f"match {match_id} is held here already")
        if not 2 <= len(seats) <= 5:
            raise InvalidTable(f"a match seats 2 to 5 bots, not {len(seats)}")
        if len({name for name, _ in seats}) != len(seats):
            raise InvalidTable("a bot can hold only one seat in a match")
        for index, (name, _) in enumerate(seats):
            if not name or has_control_characters(name):
                raise InvalidBotName(f"seat {index}: invalid bot name {echo(name, ECHO_LIMIT)}")
        check_time_control(time_control)
        try:
            self.tickets.issue(match_id, seats)
        except ValueError as exc:
            raise InvalidTable(str(exc)) from None
        pending = PendingMatch(match_id, tuple(seats), seed, time_control, meta)
        self.pending[match_id] = pending
        pending.timer = asyncio.get_running_loop().call_later(
            join_timeout_s, self._start_pending, pending, True)
        self._start_if_ready(pending)

    def bot_connected(self, bot: BotEntry) -> None:
        """Start the held matches that waited for ``bot`` and no other."""
        for pending in [p for p in self.pending.values() if bot.name in p.names]:
            self._start_if_ready(pending)

    def _start_if_ready(self, pending: PendingMatch) -> None:
        ready = all((bot := self.bots.get(name)) is not None and bot.connection is not None
                    for name in pending.names)
        if ready:
            self._start_pending(pending, False)

    def _start_pending(self, pending: PendingMatch, timed_out: bool) -> None:
        if self.pending.get(pending.match_id) is not pending:
            return
        del self.pending[pending.match_id]
        if pending.timer is not None:
            pending.timer.cancel()
        names = pending.names
        for name in names:
            self.bots.entry(name)
        try:
            self._start(pending)
        except Exception as exc:
            self.tickets.forget(pending.match_id)
            log.warning("assigned match %s could not start: %s", pending.match_id, exc)
            for callback in self.on_hosting_failed:
                callback(pending.match_id, str(exc))
            return
        if timed_out:
            missing = [n for n in names if (b := self.bots.get(n)) is None or b.connection is None]
            log.info("assigned match %s started without %s (not connected in time)",
                     pending.match_id, ", ".join(missing))

    def cancel(self, match_id: str, reason: str) -> bool:
        """Drop a held match that has not started; False when none is held."""
        pending = self.pending.pop(match_id, None)
        if pending is None:
            return False
        if pending.timer is not None:
            pending.timer.cancel()
        self.tickets.forget(match_id)
        log.info("assigned match %s cancelled before it began: %s", match_id, reason)
        return True

    def abandon_all(self, reason: str) -> None:
        """Drop every held match (the referee is stopping); each is reported to
        `on_hosting_failed`, so that its hosted bots stop and its ladder hears at once."""
        for match_id in list(self.pending):
            self.cancel(match_id, reason)
            for callback in self.on_hosting_failed:
                callback(match_id, reason)
