"""The matches the bot is seated in, each with its own worker.

Messages are routed to one worker per match, so each match sees its hooks and requests in the
order the referee sent them while matches proceed independently. A message that needs no await
while nothing of its match waits (a request, a verdict, a hook the bot does not have or runs
inline) is handled as it arrives; the worker is started the first time one must wait. A match
is forgotten when it ends, or when a reconnect comes too late for the referee to resume it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .decisions import BotCalls, Decisions
from .matchlog import log_match_end, log_match_start
from .types import (
    AnswerResult,
    MatchEnded,
    MatchEndStatus,
    MatchMessage,
    MatchStart,
    Observation,
    PublicEvent,
    RotationRequest,
    RoundEnded,
    Welcome,
)

__all__ = ["Matches", "Tally"]

log = logging.getLogger("scout_client")

_ENDED_MATCHES_REMEMBERED = 1024


@dataclass(eq=False)
class _Match:
    match_id: str
    inbox: asyncio.Queue[tuple[float, MatchMessage | _Pending]] = field(
        default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    busy: bool = False
    """The worker is handling a message: the next ones wait in the inbox, in order."""
    seat: int | None = None


@dataclass(frozen=True, eq=False)
class _Pending:
    """What a quick bot's plain hook returned to await before the match's next message."""

    awaitable: Awaitable[object]
    ends_match: bool


class Tally:
    """Matches that ended over every stream of one bot, setting `stop` once `max_matches`
    have."""

    def __init__(self, max_matches: int | None, stop: asyncio.Event) -> None:
        self._max_matches = max_matches
        self._stop = stop
        self.finished = 0

    def ended(self) -> None:
        self.finished += 1
        if self._max_matches is not None and self.finished >= self._max_matches:
            log.info("played %d match(es); stopping", self.finished)
            self._stop.set()


class Matches:
    """Routes the messages of one stream's matches (the main stream's, or a node's) to their
    workers; `tally` counts those that end, and `on_end` hears of each."""

    def __init__(
        self,
        calls: BotCalls,
        decisions: Decisions,
        *,
        tally: Tally,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        self._calls = calls
        self._decisions = decisions
        self._tally = tally
        self._on_end = on_end
        self._matches: dict[str, _Match] = {}
        self._ended: OrderedDict[str, bool] = OrderedDict()  # True: a void was told since
        self._workers: set[asyncio.Task[None]] = set()

    def receive(self, message: MatchMessage, received_at: float) -> None:
        """Queue `message` for its match's worker, starting the worker for a new match."""
        match_id = message.match_id
        if match_id in self._ended:
            if (isinstance(message, MatchEnded) and message.status is MatchEndStatus.VOIDED
                    and not self._ended[match_id]):
                # It finished here, but its node was lost before the ladder heard the result.
                self._ended[match_id] = True
                _log_ending(message, " after it ended here (its result does not count)")
                return
            log.debug("match %s: ignoring %s after the match ended", match_id,
                      type(message).__name__)
            return
        match = self._matches.get(match_id)
        if match is None:
            if isinstance(message, AnswerResult):
                log.warning("match %s: answer to request %d: %s %s", match_id,
                            message.request_id, message.status.name, message.reason)
                return
            if isinstance(message, MatchEnded):  # voided before it began here: nothing to free
                _log_ending(message, " (before it began here)")
                return
            match = self._open(match_id)
        if not match.busy and match.inbox.empty() and self._handle_now(match, message,
                                                                        received_at):
            return
        self._enqueue(match, received_at, message)

    def _enqueue(self, match: _Match, received_at: float, item: MatchMessage | _Pending) -> None:
        """Leave ``item`` to the match's worker (started on first use)."""
        match.inbox.put_nowait((received_at, item))
        if match.worker is None:
            match.worker = asyncio.ensure_future(self._play(match))
            self._workers.add(match.worker)
            match.worker.add_done_callback(self._workers.discard)

    def _handle_now(self, match: _Match, message: MatchMessage, received_at: float) -> bool:
        """Handle ``message`` at once when nothing of its match is waiting and it needs no
        await (a request, a verdict, a hook the bot does not override or runs inline as a
        `Bot.quick` bot): the usual case, and it saves the worker's wake-up. False: queue it.
        """
        hook = _hook_of(message)
        calls = self._calls
        if hook is not None and calls.overrides(hook) and not calls.inline(
                getattr(calls.bot, hook)):
            return False
        self._take(match, message, received_at)
        left = calls.hook_now(hook, message) if hook is not None else None
        ends = isinstance(message, MatchEnded)
        if left is not None:  # the worker awaits it (and ends the match) before what follows
            self._enqueue(match, received_at, _Pending(left, ends))
        elif ends:
            self._end(match.match_id)
        return True

    def resync(self, welcome: Welcome) -> None:
        """After a Welcome that did not resume the session, drop the running matches: the
        reconnect came after the grace, so the referee forfeited these seats and will say
        nothing more about them."""
        if welcome.resumed or not self._matches:
            return
        lost = sorted(self._matches)
        log.warning("the referee did not resume %d running match(es): %s", len(lost),
                    ", ".join(lost))
        for match_id in lost:
            self._end(match_id)

    def knows(self, match_id: str) -> bool:
        """Whether the match runs here, or ended here lately."""
        return match_id in self._matches or match_id in self._ended

    def has_ended(self, match_id: str) -> bool:
        """Whether the match ended here lately."""
        return match_id in self._ended

    def _open(self, match_id: str) -> _Match:
        match = _Match(match_id)
        self._matches[match_id] = match
        return match

    def _end(self, match_id: str) -> None:
        match = self._matches.pop(match_id, None)
        if match is None:
            return
        self._ended[match_id] = False
        while len(self._ended) > _ENDED_MATCHES_REMEMBERED:
            self._ended.popitem(last=False)
        if match.worker is not None and match.worker is not asyncio.current_task():
            match.worker.cancel()
        self._decisions.forget(match_id)
        if self._on_end is not None:
            self._on_end(match_id)
        self._tally.ended()

    async def _play(self, match: _Match) -> None:
        """One match's messages in order: hooks are awaited so the bot sees events before the
        next request; requests get their own task so a slow bot never delays reading."""
        while True:
            match.busy = False
            received_at, message = await match.inbox.get()
            match.busy = True
            if isinstance(message, _Pending):
                try:
                    await message.awaitable
                except Exception:
                    log.exception("match %s: a hook of the bot raised", match.match_id)
                if message.ends_match:
                    self._end(match.match_id)
                    return
                continue
            self._take(match, message, received_at)
            hook = _hook_of(message)
            if hook is not None:
                await self._calls.hook(hook, message)
            if isinstance(message, MatchEnded):
                self._end(match.match_id)
                return

    def _take(self, match: _Match, message: MatchMessage, received_at: float) -> None:
        """What handling ``message`` does before its hook (if any), with no await: the same
        whether it is handled as it arrives or by the match's worker."""
        if isinstance(message, RotationRequest | Observation):
            self._decisions.open(message, received_at)
        elif isinstance(message, AnswerResult):
            self._decisions.settle(message)
        elif isinstance(message, MatchStart):
            match.seat = message.seat
            if message.resumed:
                _log_resumed(message)
            else:
                log_match_start(message)
        elif isinstance(message, RoundEnded):
            self._decisions.close_match(match.match_id)
        elif isinstance(message, MatchEnded):
            if message.finished:
                log_match_end(message, match.seat)
            else:
                _log_ending(message)

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel every match's worker; returns them for the caller to await."""
        workers = list(self._workers)
        for worker in workers:
            worker.cancel()
        return workers


def _hook_of(message: MatchMessage) -> str | None:
    """The bot's hook a match message calls, if any."""
    if isinstance(message, AnswerResult):
        return "on_rejected" if message.rejected else None
    return _HOOKS.get(type(message))


_HOOKS: dict[type, str] = {MatchStart: "on_match_start", PublicEvent: "on_event",
                           RoundEnded: "on_round_end", MatchEnded: "on_match_end"}


def _log_ending(message: MatchEnded, where: str = "") -> None:
    """A match that ended without a result: how and why."""
    log.warning("match %s %s%s: %s", message.match_id, message.status.name.lower(), where,
                message.reason or "no reason given")


def _log_resumed(message: MatchStart) -> None:
    if message.resumed:
        log.info("match %s resumed (seat %d, bank %d ms, %d strikes)", message.match_id,
                 message.seat, message.time_bank_ms, message.strikes)
