"""The candidate actions the tree searches, the rollout policy's choice first.

The rollout policy itself, and the playout of a round with it, are the rules package's
(`scout_rules.playout`): any Python bot can search with them.
"""

from __future__ import annotations

from scout_rules import Action, Card, End, Scout, ScoutAndShow, State
from scout_rules.moves import legal_shows, scout_ends
from scout_rules.playout import (
    best_scout,
    best_show,
    fit,
    greedy_action,
    may_scout,
    scout_and_shows,
)

__all__ = ["candidates", "greedy_action"]


def _scouts(faces: list[int], active: list[Card]) -> list[tuple[int, Scout]]:
    """Every Scout with its fit (longest group through the new card), not turned first."""
    out: list[tuple[int, Scout]] = []
    size = len(active)
    for end in scout_ends(size):
        taken = active[0] if end == End.LEFT or size == 1 else active[-1]
        for flip in (False, True):
            value = taken.other if flip else taken.face
            for pos in range(len(faces) + 1):
                out.append((fit(faces, pos, value) * 2 + (0 if flip else 1),
                            Scout(end, flip, pos)))
    return out


def candidates(state: State, scouts_per_way: int = 2, max_combos: int = 4) -> list[Action]:
    """The actions the tree considers for the seat to act, the rollout policy's choice first:
    every legal Show; for each end and way up, the ``scouts_per_way`` best insert positions;
    the ``max_combos`` best Scout & Shows of two cards or more."""
    seat = state.current_seat
    assert seat is not None
    faces = state.faces[seat]
    active = state.active
    shows = legal_shows(faces, state.active_key)
    combos: list[tuple[int, ScoutAndShow]] = []
    if active and state.scout_show_tokens[seat]:
        combos = scout_and_shows(faces, active, 2)
    first: Action
    if shows:
        first = best_show(faces, shows)
    else:
        need = max(2, len(active))
        usable = [kc for kc in combos if kc[1].show.length >= need]
        if usable:  # the same choice as greedy_action's
            first = max(usable, key=lambda kc: kc[0])[1]
        elif may_scout(state, seat):
            first = best_scout(faces, active)
        else:
            return state.legal_actions()[:1]
    out: list[Action] = [first]
    out.extend(show for show in shows if show != first)
    if may_scout(state, seat):
        by_way: dict[tuple[End, bool], list[tuple[int, Scout]]] = {}
        for item in _scouts(faces, active):
            by_way.setdefault((item[1].end, item[1].flip), []).append(item)
        for items in by_way.values():
            items.sort(key=lambda kc: -kc[0])
            out.extend(scout for _, scout in items[:scouts_per_way] if scout != first)
        if state.num_players > 2 and combos:
            combos.sort(key=lambda kc: -kc[0])
            out.extend(combo for _, combo in combos[:max_combos] if combo != first)
    return out
