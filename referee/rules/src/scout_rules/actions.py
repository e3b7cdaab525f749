"""The three actions of a turn and the public record of one, as small immutable values.

Positions are 0-based indices into the acting player's hand, leftmost card first. A `Scout`
inserts the taken card *before* the card now at ``insert_at`` (``insert_at == len(hand)`` appends
on the right). In a `ScoutAndShow` the Show's positions refer to the hand after the Scout.

These are the one model of the game: the engine, the referee and the SDK all use them. They are
named tuples, so they are hashable, compare with ``==`` and cost little to build, which the
engine's move generation and a bot's search both depend on.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import NamedTuple, TypeAlias

from .cards import Card


class End(IntEnum):
    """Which end of the active set a Scout takes."""

    LEFT = 0
    RIGHT = 1


class ActionKind(StrEnum):
    """The kind of an action in the public history. ``UNSPECIFIED`` is what a reader of the
    wire makes of a kind it does not know; the engine never produces it."""

    UNSPECIFIED = "unspecified"
    SHOW = "show"
    SCOUT = "scout"
    SCOUT_AND_SHOW = "scout_and_show"


class Show(NamedTuple):
    """Play hand[start : start + length] as the new active set."""

    start: int
    length: int

    @property
    def stop(self) -> int:
        """One past the last position shown, so `hand[show.start : show.stop]` is the group."""
        return self.start + self.length

    def __str__(self) -> str:
        if self.length == 1:
            return f"show position {self.start}"
        return f"show positions {self.start}-{self.start + self.length - 1}"


class Scout(NamedTuple):
    """Take the card at ``end`` of the active set, turn it if ``flip``, insert at ``insert_at``."""

    end: End
    flip: bool
    insert_at: int

    def __str__(self) -> str:
        side = "left" if self.end == End.LEFT else "right"
        turned = " turned" if self.flip else ""
        return f"scout {side} end{turned} into position {self.insert_at}"


class ScoutAndShow(NamedTuple):
    """The once-per-round Scout & Show (3-5 players): one atomic action."""

    scout: Scout
    show: Show

    def __str__(self) -> str:
        return f"{self.scout}, then {self.show}"


Action: TypeAlias = Show | Scout | ScoutAndShow


class PublicAction(NamedTuple):
    """An action as every seat saw it. A Scout's turn (flip) stays private: at the table the
    other players see which card was taken and where it went in, not which way up. Fields that
    do not apply to the kind are None: a plain Scout has no start/length, a Show has no
    end/insert_at. ``cards``: a Show's group; a Scout's card as it lay on the table; for a
    Scout & Show that card, then the group. ``by_referee``: the referee played it as the
    fallback of a seat that did not answer in time (the engine itself never sets it)."""

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

    def __str__(self) -> str:
        shown = " ".join(str(c.face) for c in self.cards)
        if self.kind == ActionKind.SHOW:
            return f"seat {self.seat} shows {shown}"
        if self.kind == ActionKind.SCOUT:
            return f"seat {self.seat} scouts {self.cards[0].pair} into position {self.insert_at}"
        return (
            f"seat {self.seat} scouts {self.cards[0].pair} into position {self.insert_at} "
            f"and shows {' '.join(str(c.face) for c in self.cards[1:])}"
        )
