"""What a group is and what beats it, on face values: the helpers a bot needs beyond the legal
lists a referee sends (it lists every legal Show and Scout but not the Scout & Show
combinations, whose Show part must beat what remains of the active set).

They are the engine's own rules (`moves.group_key`, `moves.legal_shows`), offered in a bot
author's words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._native import SPEEDUPS
from .actions import Show
from .cards import Card
from .moves import NO_ACTIVE_SET, SET_BIT, group_key, legal_shows

__all__ = ["Strength", "beats", "group_strength", "groups_in", "hand_potential",
           "more_playable_rotated"]

Strength = tuple[int, int, int]
"""(length, 1 for a set / 0 for a run, lowest value): a bigger tuple is a stronger group."""


def group_strength(faces: Sequence[int]) -> Strength | None:
    """The strength of a set (all equal; a single card is a set) or run (strictly consecutive,
    ascending or descending), or None when `faces` is neither."""
    key = group_key(faces)
    if key < 0:
        return None
    return (key >> 5, 1 if key & SET_BIT else 0, key & 15)


def beats(faces: Sequence[int], active: Sequence[int]) -> bool:
    """Whether showing `faces` beats the active set `active` (anything valid beats a clear
    table; equal strength does not beat)."""
    key = group_key(faces)
    return key >= 0 and (not active or key > group_key(active))


def groups_in(faces: Sequence[int], active: Sequence[int] = ()) -> list[Show]:
    """Every slice of `faces` that is a group beating `active`, by start then length."""
    return legal_shows(faces, group_key(active) if active else NO_ACTIVE_SET)


def _hand_potential(faces: Sequence[int]) -> int:
    return sum(show.length**2 for show in legal_shows(faces, NO_ACTIVE_SET) if show.length > 1)


def _more_playable_rotated(hand: Sequence[Card]) -> bool:
    return (_hand_potential([c.other for c in reversed(hand)])
            > _hand_potential([c.face for c in hand]))


#: The pure-Python functions, the reference their C twins (`_native.SPEEDUPS`) are held to.
REFERENCE: dict[str, Callable[..., object]] = {
    "hand_potential": _hand_potential, "more_playable_rotated": _more_playable_rotated}

hand_potential: Callable[[Sequence[int]], int] = _hand_potential
"""How playable a hand is: the summed squares of the lengths of its multi-card groups, so one
long group counts for more than several short ones."""
more_playable_rotated: Callable[[Sequence[Card]], bool] = _more_playable_rotated
"""Whether this hand has the greater `hand_potential` turned 180 degrees: GreedyBot's rotation
rule, and what the search bot assumes of an opponent's choice (a search calls it for every
opponent of every fill, hence the C twin)."""
if SPEEDUPS is not None:
    hand_potential = SPEEDUPS.hand_potential
    more_playable_rotated = SPEEDUPS.more_playable_rotated
