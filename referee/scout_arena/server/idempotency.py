"""CreateMatch idempotency keys: a retried CreateMatch gets the match its first call made.

An organiser whose CreateMatch timed out or lost its connection cannot tell whether the match
was made. With an idempotency key it simply retries: a call with a key already taken by an
*equal* request returns that request's match (no second match is made); a call with a key
taken by a *different* request is refused (`IdempotencyKeyReused`). A key is taken only by a
call that made a match, and kept for `KEY_WINDOW_S` after that (at most `MAX_KEYS` keys, the
oldest forgotten first), so the memory the keys take is bounded. Requests are equal when they
name the same bots in the same seats, the same seed (or both none) and the same time control
once the referee's defaults are filled in.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from scout_rules.protocol import TimeControl

from scout_arena.text import echo

from .errors import (
    ECHO_LIMIT,
    IdempotencyKeyReused,
    InvalidIdempotencyKey,
    has_control_characters,
)
from .events import MatchSnapshot

KEY_WINDOW_S = 600.0
"""How long a key keeps naming its match: a retry within this time gets the first match."""
MAX_KEYS = 10_000
"""The most keys kept at once; beyond it the oldest is forgotten first."""
MAX_KEY_LENGTH = 128
"""The longest key accepted, in characters."""


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """What a CreateMatch asks for, as compared between two calls with the same key."""

    bots: tuple[str, ...]
    seed: int | None
    time_control: TimeControl


@dataclass(slots=True)
class _Entry:
    request: CreateRequest
    match_id: str
    expires_at: float
    snapshot: MatchSnapshot
    """The match as it stood when made, then as it ended: what a retry is told once the
    referee no longer keeps the match itself."""


def check_key(key: str) -> None:
    """Refuse a key no call may use: longer than MAX_KEY_LENGTH, or with control characters."""
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(f"an idempotency key has at most {MAX_KEY_LENGTH} "
                                    f"characters, got {echo(key, ECHO_LIMIT)}")
    if has_control_characters(key):
        raise InvalidIdempotencyKey(f"an idempotency key has no control characters, got "
                                    f"{echo(key, ECHO_LIMIT)}")


class IdempotencyKeys:
    """The keys of recent CreateMatch calls that made a match, each with its request."""

    def __init__(self, window_s: float = KEY_WINDOW_S, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if window_s <= 0 or max_keys < 1:
            raise ValueError("window_s must be positive and max_keys at least 1")
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        """By key, oldest first (every entry lives equally long, so the first expires first)."""
        self._by_match: dict[str, str] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def find(self, key: str, request: CreateRequest) -> tuple[str, MatchSnapshot] | None:
        """The match id (and last snapshot kept) of the match ``key`` made, or None if the key
        is free. Raises `IdempotencyKeyReused` if the key made a match for another request."""
        check_key(key)
        self._expire()
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.request != request:
            raise IdempotencyKeyReused(
                f"idempotency key {echo(key, ECHO_LIMIT)} was already used for a different request "
                f"(match {entry.match_id}: bots {_names(entry.request.bots)}); a new match "
                "needs a new key")
        return entry.match_id, entry.snapshot

    def remember(self, key: str, request: CreateRequest, snapshot: MatchSnapshot) -> None:
        """``key`` made the match of ``snapshot`` for ``request``."""
        self._expire()
        old = self._entries.pop(key, None)
        if old is not None:
            self._by_match.pop(old.match_id, None)
        self._entries[key] = _Entry(request, snapshot.match_id,
                                    self._clock() + self.window_s, snapshot)
        self._by_match[snapshot.match_id] = key
        while len(self._entries) > self.max_keys:
            self._forget_oldest()

    def holds(self, match_id: str) -> bool:
        """Whether a key kept names the match ``match_id``."""
        return match_id in self._by_match

    def match_ended(self, snapshot: MatchSnapshot) -> None:
        """Keep how a keyed match ended, for retries after the referee has forgotten it."""
        key = self._by_match.get(snapshot.match_id)
        if key is not None:
            self._entries[key].snapshot = snapshot

    def _expire(self) -> None:
        now = self._clock()
        while self._entries and next(iter(self._entries.values())).expires_at <= now:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)
        self._by_match.pop(entry.match_id, None)


def _names(bots: tuple[str, ...]) -> str:
    return "[" + ", ".join(echo(name, 40) for name in bots) + "]"
