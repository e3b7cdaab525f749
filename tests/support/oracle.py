"""An independent statement of the rules, written from RULES.md alone, for checking the engine.

Property tests and perft both compare the engine's legal actions against these enumerations;
the code here must never call the engine's own move generators.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from scout_arena.engine import Action, End, Scout, ScoutAndShow, Show, State

L, R = End.LEFT, End.RIGHT


def strength(faces: Sequence[int]) -> tuple[int, int, int] | None:
    """(cards, 1 for a set / 0 for a run, lowest value), or None if not a group."""
    n = len(faces)
    if n == 0:
        return None
    if all(f == faces[0] for f in faces):
        return (n, 1, faces[0])
    steps = {b - a for a, b in itertools.pairwise(faces)}
    if steps in ({1}, {-1}):
        return (n, 0, min(faces))
    return None


def oracle_shows(faces: Sequence[int], table: Sequence[int]) -> set[Show]:
    beat = strength(table) if table else None
    return {
        Show(s, k)
        for s in range(len(faces)) for k in range(1, len(faces) - s + 1)
        if (key := strength(faces[s : s + k])) is not None and (beat is None or key > beat)
    }


def oracle_actions(state: State) -> set[Action]:
    """Every distinct legal action, computed from the rules text alone."""
    seat = state.current_seat
    assert seat is not None
    hand = list(state.hand(seat))
    faces = [c.face for c in hand]
    active = list(state.active_set)
    out: set[Action] = set(oracle_shows(faces, [c.face for c in active]))
    ends = [L] if len(active) == 1 else [L, R]
    if active and (state.num_players > 2 or state.scout_chips[seat] > 0):
        out |= {Scout(e, f, p) for e in ends for f in (False, True) for p in range(len(hand) + 1)}
    if state.num_players > 2 and active and state.scout_show_tokens[seat]:
        for e in ends:
            card = active[0] if e == L else active[-1]
            rest = [c.face for c in (active[1:] if e == L else active[:-1])]
            for flip in (False, True):
                value = card.other if flip else card.face
                for p in range(len(hand) + 1):
                    for show in oracle_shows([*faces[:p], value, *faces[p:]], rest):
                        out.add(ScoutAndShow(Scout(e, flip, p), show))
    return out


def canonical(action: Action, active_size: int) -> Action:
    """A one-card active set has one distinct end: naming RIGHT is the same Scout as LEFT."""
    if active_size != 1:
        return action
    if isinstance(action, Scout):
        return action._replace(end=L)
    if isinstance(action, ScoutAndShow):
        return action._replace(scout=action.scout._replace(end=L))
    return action


def brute_force_legal(state: State, with_scout_and_show: bool = True) -> set[Action]:
    """Every action a bot could name, kept if `is_legal` accepts it (then made canonical)."""
    seat = state.current_seat
    assert seat is not None
    size = len(state.hand(seat))
    candidates: list[Action] = [Show(s, k) for s in range(size) for k in range(1, size - s + 1)]
    scouts = [Scout(e, f, p) for e in (L, R) for f in (False, True) for p in range(size + 1)]
    candidates += scouts
    if with_scout_and_show:
        candidates += [ScoutAndShow(sc, Show(s, k)) for sc in scouts
                       for s in range(size + 1) for k in range(1, size + 2 - s)]
    active = len(state.active_set)
    return {canonical(a, active) for a in candidates if state.is_legal(a)}
