"""The three actions of a turn, as small immutable values.

Positions are 0-based indices into the acting player's hand, leftmost card first. A `Scout`
inserts the taken card *before* the card now at ``insert_at`` (``insert_at == len(hand)`` appends
on the right). In a `ScoutAndShow` the Show's positions refer to the hand after the Scout.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class End(IntEnum):
    """Which end of the active set a Scout takes."""

    LEFT = 0
    RIGHT = 1


class Show(NamedTuple):
    """Play hand[start : start + length] as the new active set."""

    start: int
    length: int

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


Action = Show | Scout | ScoutAndShow
