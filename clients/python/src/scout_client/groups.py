"""The few rules a bot needs beyond the referee's legal lists: what a group is and what beats it.

The referee lists every legal Show and Scout but not the Scout & Show combinations (there are
too many), so the Show part of one must be checked against what remains of the active set;
`Observation.scout_and_shows` and `Observation.is_legal` do that with these helpers. They work
on face values only, which is all a comparison needs, and so depend on nothing but `actions`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .actions import Show

__all__ = [
    "Strength",
    "beats",
    "group_strength",
    "groups_in",
    "hand_potential",
]

Strength = tuple[int, int, int]
"""(length, 1 for a set / 0 for a run, lowest value): a bigger tuple is a stronger group."""


def group_strength(faces: Sequence[int]) -> Strength | None:
    """The strength of a set (all equal; a single card is a set) or run (strictly consecutive,
    ascending or descending), or None when `faces` is neither."""
    if not faces:
        return None
    first = faces[0]
    if all(value == first for value in faces):
        return (len(faces), 1, first)
    step = faces[1] - first
    if step not in (1, -1):
        return None
    if any(faces[i + 1] - faces[i] != step for i in range(len(faces) - 1)):
        return None
    return (len(faces), 0, min(first, faces[-1]))


def beats(faces: Sequence[int], active: Sequence[int]) -> bool:
    """Whether showing `faces` beats the active set `active` (anything valid beats a clear
    table; equal strength does not beat)."""
    strength = group_strength(faces)
    if strength is None:
        return False
    if not active:
        return True
    target = group_strength(active)
    return target is None or strength > target


def groups_in(faces: Sequence[int], active: Sequence[int] = ()) -> list[Show]:
    """Every slice of `faces` that is a group beating `active`, by start then length.

    Each start's slices are grown one card at a time, keeping whether they are still a set
    or a run: bots call this for every Scout they weigh, so it must not re-check each slice
    from scratch."""
    target = group_strength(active) if active else None
    shows: list[Show] = []
    count = len(faces)
    for start in range(count):
        first = previous = faces[start]
        step = 0  # 0: a set so far; 1 or -1: a run going that way
        if target is None or (1, 1, first) > target:
            shows.append(Show(start, 1))
        for stop in range(start + 2, count + 1):
            value = faces[stop - 1]
            change = value - previous
            if stop == start + 2:
                if change not in (0, 1, -1):
                    break
                step = change
            elif change != step:
                break
            previous = value
            length = stop - start
            strength = (length, 1, first) if step == 0 else \
                (length, 0, first if first < value else value)
            if target is None or strength > target:
                shows.append(Show(start, length))
    return shows


def hand_potential(faces: Sequence[int]) -> int:
    """How playable a hand is: the summed squares of the lengths of its multi-card groups, so
    one long group counts for more than several short ones."""
    return sum(show.length**2 for show in groups_in(faces) if show.length > 1)

