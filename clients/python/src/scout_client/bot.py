"""The class a bot author subclasses.

A bot is one `act` method; everything else (connection, reconnects, deadlines, fallbacks,
request ids) is the runner's job. One Bot instance plays every match of its process, possibly
several at once: a sync `act` runs in a worker thread per request, so keep per-match state in
a dict keyed by `observation.match_id` (and guard shared state with a lock), or write
`async def act` to stay on the event loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable

from .types import (
    Action,
    AnswerResult,
    Goodbye,
    MatchEnded,
    MatchStart,
    Observation,
    Probation,
    PublicEvent,
    RotationRequest,
    RoundEnded,
)

__all__ = ["Bot"]


class Bot(ABC):
    """Subclass, set `name`, and write `act` (plain or `async def`).

    Every method may be plain or `async def`. Plain methods run in worker threads so a slow
    bot in one match never stalls the others (on the event loop for a `quick` bot); async ones
    run on the event loop and must not block. For each match the SDK calls the hooks and
    `act`/`choose_rotation` in the order the referee's messages arrived.
    """

    name: str = ""
    """The display name sent in Hello (the referee's name for the token is authoritative)."""
    version: str = "0"
    """Free text sent in Hello, e.g. a git hash, to tell versions apart in logs."""
    quick: bool = False
    """True for a bot whose plain methods return at once (well under a millisecond, as the
    bundled random and greedy bots do): the SDK then calls them on its event loop instead of
    handing each to a worker thread, which costs more than such a bot's thinking. A quick bot
    that is slow after all stalls every match of the process while it thinks."""

    @abstractmethod
    def act(self, observation: Observation) -> Action | Awaitable[Action]:
        """Choose the action for this turn. Any entry of `observation.legal_shows` or
        `observation.legal_scouts` may be returned as is; a `ScoutAndShow` is built by the bot
        (see `Observation.scout_and_shows`). If this raises or runs out of time, the SDK sends
        `observation.fallback()` instead."""

    def choose_rotation(self, request: RotationRequest) -> bool | Awaitable[bool]:
        """Whether to rotate the dealt hand 180 degrees; not rotating is the default."""
        return False

    def on_match_start(self, start: MatchStart) -> Awaitable[None] | None:
        """A match begins, or resumes after a reconnect (`start.resumed`)."""
        return None

    def on_event(self, event: PublicEvent) -> Awaitable[None] | None:
        """An action by any seat, this bot's own included, as it happens. Overriding this makes
        the SDK ask for the full stream; otherwise it asks for a lean one, with no PublicEvent
        (PROTOCOL.md §3.6.1), and `act` learns what happened from `observation.history`."""
        return None

    def on_round_end(self, round_ended: RoundEnded) -> Awaitable[None] | None:
        """A round ended; every hand is revealed."""
        return None

    def on_match_end(self, match_ended: MatchEnded) -> Awaitable[None] | None:
        """A match ended, however it ended: drop its per-match state here. Called once per
        match the bot played. `match_ended.status` says how: FINISHED (with totals and ranks),
        or ABORTED (the referee stopped) or VOIDED (the ladder voided it: its node was lost),
        which have no result and `match_ended.reason` says why."""
        return None

    def on_rejected(self, result: AnswerResult) -> Awaitable[None] | None:
        """An answer was judged ILLEGAL or MALFORMED (a strike). The SDK has already sent the
        fallback if the request was still open and time remained; this is for logging and
        fixing the bot."""
        return None

    def on_goodbye(self, goodbye: Goodbye) -> Awaitable[None] | None:
        """The referee ended the stream on purpose. With `goodbye.reconnect` the SDK comes
        back after `goodbye.retry_after_ms`; without it `run`/`run_bot` return once this hook
        has. Matches still running were stopped by the referee: drop their state here."""
        return None

    def on_probation(self, probation: Probation) -> Awaitable[None] | None:
        """The ladder put the bot on probation (`probation.active`: no match is scheduled for
        it until it reconnects, when `lifted_by_reconnect`, or its owner lifts it) or lifted
        it. The SDK logs it either way and does not reconnect by itself: restart the bot once
        it is fixed."""
        return None

    @property
    def display_name(self) -> str:
        """`name`, or the class name when a subclass did not set one."""
        return self.name or type(self).__name__
