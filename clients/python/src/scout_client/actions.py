"""Cards and the three actions: the words every other module of the SDK is built from.

This is the bottom layer. It imports nothing else from the SDK, so the group rules (`groups`)
can use it, and the messages (`observation`, `types`) can use both without a cycle. Sequences
are tuples so every value is hashable and compares with `==`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

__all__ = [
    "Action",
    "ActionKind",
    "Card",
    "End",
    "PublicAction",
    "Scout",
    "ScoutAndShow",
    "Show",
]


class End(Enum):
    """Which end of the active set a Scout takes."""

    LEFT = "left"
    RIGHT = "right"


class ActionKind(Enum):
    """The kind of an action in the public history."""

    UNSPECIFIED = "unspecified"
    SHOW = "show"
    SCOUT = "scout"
    SCOUT_AND_SHOW = "scout_and_show"


@dataclass(frozen=True, slots=True)
class Card:
    """One card as held or shown: `face` is in play, `other` is the turned-away value."""

    face: int
    other: int

    def flipped(self) -> Card:
        """The same card turned round, as after a rotation or a turned Scout."""
        return Card(self.other, self.face)


@dataclass(frozen=True, slots=True)
class Show:
    """Play `hand[start : start + length]` as the new active set (0-based positions)."""

    start: int
    length: int

    @property
    def stop(self) -> int:
        """One past the last position shown, so `hand[show.start : show.stop]` is the group."""
        return self.start + self.length


@dataclass(frozen=True, slots=True)
class Scout:
    """Take the `end` card of the active set, turned if `flip`, into the hand before position
    `insert_at` (the hand size appends it on the right)."""

    end: End
    flip: bool
    insert_at: int


@dataclass(frozen=True, slots=True)
class ScoutAndShow:
    """The once-per-round Scout & Show (3-5 players); `show` indexes the hand after the Scout."""

    scout: Scout
    show: Show


Action: TypeAlias = Show | Scout | ScoutAndShow
"""What `Bot.act` returns."""


@dataclass(frozen=True, slots=True)
class PublicAction:
    """An action as every seat saw it. The turn (flip) of a scouted card is private, so it is
    not here. Fields that do not apply to the kind are None: a plain Scout has no start/length,
    a Show has no end/insert_at."""

    seat: int
    kind: ActionKind
    cards: tuple[Card, ...] = ()
    start: int | None = None
    length: int | None = None
    end: End | None = None
    insert_at: int | None = None
    by_referee: bool = False

    @property
    def scouted_card(self) -> Card | None:
        """The card taken by a Scout or Scout & Show, as it lay on the table."""
        if self.kind in (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW) and self.cards:
            return self.cards[0]
        return None

    @property
    def shown_cards(self) -> tuple[Card, ...]:
        """The group a Show or Scout & Show put on the table (empty for a plain Scout)."""
        if self.kind is ActionKind.SHOW:
            return self.cards
        if self.kind is ActionKind.SCOUT_AND_SHOW:
            return self.cards[1:]
        return ()
