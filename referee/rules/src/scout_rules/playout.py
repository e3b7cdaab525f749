"""Greedy playouts of a round: the policy a search plays its rollouts with, and the playout.

The policy is the bundled GreedyBot's idea made cheap: show the longest group (the weakest on
ties), else a Scout & Show of at least two cards and at least as many as the active set, else
scout the card where it extends the longest group of the hand. It reads the `State`'s public
lists directly (``faces``, ``active``, ``active_key``) and uses the engine's own move
generation, so every action it returns is legal.

`round_scores` plays the round in progress out with that policy for every seat, and
`candidates` is the short list of actions a search tries, the policy's choice first. Both have
an optional C core (``_playout``, built as ``_speedups`` is): the round is played on C arrays
without touching the state. The Python functions here are the reference the core is tested
against, and what runs without a compiler.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._native import PLAYOUT
from .actions import Action, End, Scout, ScoutAndShow, Show
from .cards import Card
from .moves import NO_ACTIVE_SET, group_key, legal_shows, scout_ends
from .rounds import Phase
from .state import State

__all__ = ["COMPILED", "best_scout", "best_show", "candidates", "fit", "greedy_action",
           "may_scout", "round_scores", "scout_and_shows", "show_key"]

#: Whether `round_scores` and `candidates` run in C.
COMPILED = PLAYOUT is not None
if PLAYOUT is not None:
    PLAYOUT.setup(Show, Scout, ScoutAndShow, End.LEFT, End.RIGHT)

_ENDS_ONE = (End.LEFT,)
_ENDS_TWO = (End.LEFT, End.RIGHT)


def show_key(faces: Sequence[int], show: Show) -> int:
    """Greedy's preference among shows as one int: longer first, then a run before a set, then
    the lower (weaker) group, so strong groups stay in hand."""
    key = group_key(faces[show.start:show.start + show.length])
    return (key >> 5) << 6 | (0 if key & 16 else 32) | (15 - (key & 15))


def fit(faces: Sequence[int], pos: int, value: int) -> int:
    """How well ``value`` inserted before ``faces[pos]`` joins its neighbours: the length of
    the longest set or run through it (1 when it joins nothing)."""
    n = len(faces)
    best = 1
    for step in (0, 1, -1):
        length = 1
        # to the left the values run value - step, value - 2 step, ...
        expect = value - step
        i = pos - 1
        while i >= 0 and faces[i] == expect:
            length += 1
            expect -= step
            i -= 1
        expect = value + step
        i = pos
        while i < n and faces[i] == expect:
            length += 1
            expect += step
            i += 1
        if length > best:
            best = length
    return best


def best_show(faces: Sequence[int], shows: Sequence[Show]) -> Show:
    best = shows[0]
    best_key = show_key(faces, best)
    for show in shows[1:]:
        key = show_key(faces, show)
        if key > best_key:
            best, best_key = show, key
    return best


def _ends(active: Sequence[Card]) -> tuple[End, ...]:
    return _ENDS_ONE if len(active) == 1 else _ENDS_TWO


def _groups_through(faces: Sequence[int], pos: int, value: int
                    ) -> list[tuple[int, int, int]]:
    """The maximal sets and runs of two cards or more through ``value`` inserted before
    ``faces[pos]``: (strength key, start, length) in the new hand."""
    n = len(faces)
    out = []
    for step in (0, 1, -1):
        expect = value - step
        i = pos - 1
        while i >= 0 and faces[i] == expect:
            expect -= step
            i -= 1
        expect = value + step
        j = pos
        while j < n and faces[j] == expect:
            expect += step
            j += 1
        # new hand: faces[i+1 .. pos-1], value, faces[pos .. j-1]
        start = i + 1
        length = j - start + 1
        if length < 2:
            continue
        if step == 0:
            key = length << 5 | 16 | value
        else:
            first = value - step * (pos - start)
            last = value + step * (j - pos)
            key = length << 5 | (first if first < last else last)
        out.append((key, start, length))
    return out


def scout_and_shows(faces: Sequence[int], active: Sequence[Card],
                     min_length: int) -> list[tuple[int, ScoutAndShow]]:
    """Scout & Shows of at least ``min_length`` (two or more) cards, each with its `show_key`:
    the longest group through the scouted card wherever it joins one, or a group of the hand
    with the card put away at the right end."""
    out: list[tuple[int, ScoutAndShow]] = []
    size = len(active)
    n = len(faces)
    for end in _ends(active):
        rest = active[1:] if end == End.LEFT else active[:-1]
        beat = group_key([c.face for c in rest]) if rest else NO_ACTIVE_SET
        if (beat >> 5) > n + 1:
            continue
        taken = active[0] if end == End.LEFT or size == 1 else active[-1]
        for show in legal_shows(faces, beat):
            if show.length >= min_length:
                out.append((show_key(faces, show), ScoutAndShow(Scout(end, False, n), show)))
        for flip in (False, True):
            value = taken.other if flip else taken.face
            for pos in range(n + 1):
                left = faces[pos - 1] - value if pos else 9
                right = faces[pos] - value if pos < n else 9
                if not (-1 <= left <= 1 or -1 <= right <= 1):
                    continue  # no group of two runs through the card here
                for key, start, length in _groups_through(faces, pos, value):
                    if length >= min_length and key > beat:
                        pref = (length << 6 | (0 if key & 16 else 32) | (15 - (key & 15)))
                        out.append((pref, ScoutAndShow(Scout(end, flip, pos),
                                                       Show(start, length))))
    return out


def may_scout(state: State, seat: int) -> bool:
    return bool(state.active) and (state.num_players > 2 or state.scout_chips[seat] > 0)


def greedy_action(state: State) -> Action:
    """The rollout policy's action for the seat to act (always legal)."""
    seat = state.current_seat
    assert seat is not None
    faces = state.faces[seat]
    shows = legal_shows(faces, state.active_key)
    if shows:
        return best_show(faces, shows)
    active = state.active
    if state.scout_show_tokens[seat] and active:
        combos = scout_and_shows(faces, active, max(2, len(active)))
        if combos:
            return max(combos, key=lambda kc: kc[0])[1]
    if not may_scout(state, seat):
        return state.legal_actions()[0]  # unreachable in a running round; kept for safety
    return best_scout(faces, active)


def best_scout(faces: Sequence[int], active: Sequence[Card]) -> Scout:
    """The Scout `_scouts` ranks first, without building every candidate: a position can
    join the card to a group only if a neighbour is within one of its value."""
    n = len(faces)
    best_score = 0
    best = (End.LEFT, False, 0)
    size = len(active)
    for end in _ends(active):
        taken = active[0] if end == End.LEFT or size == 1 else active[-1]
        for flip in (False, True):
            value = taken.other if flip else taken.face
            bonus = 0 if flip else 1
            if 2 + bonus > best_score:
                best_score, best = 2 + bonus, (end, flip, 0)
            for pos in range(n + 1):
                left = faces[pos - 1] - value if pos else 9
                right = faces[pos] - value if pos < n else 9
                if -1 <= left <= 1 or -1 <= right <= 1:
                    score = fit(faces, pos, value) * 2 + bonus
                    if score > best_score:
                        best_score, best = score, (end, flip, pos)
    return Scout(*best)


def round_scores(state: State) -> tuple[int, ...]:
    """Every seat's match score once the round in progress is played out by `greedy_action`
    for every seat (the scores as they are if the match is over).

    ``state`` is used up: it may be left anywhere in the round (the C core does not touch it,
    the Python playout plays it on); clone it first to keep it."""
    if state.phase is Phase.MATCH_OVER:
        return tuple(state.scores)
    if state.phase is not Phase.PLAY:
        raise ValueError("a round is played out only once every seat has chosen its rotation")
    if PLAYOUT is not None:
        last = state.last_shower
        seat = state.current_seat
        assert seat is not None
        scores = PLAYOUT.round_scores(
            state.num_players, state.hands, state.active, [len(c) for c in state.captured],
            state.scout_chips, state.scout_show_tokens, -1 if last is None else last,
            state.scouts_since_show, seat, state.round_actions, state.max_round_actions)
        if scores is not None:
            return tuple(a + b for a, b in zip(state.scores, scores, strict=True))
    index = state.round_index
    apply = state.apply
    while state.phase is Phase.PLAY and state.round_index == index:
        apply(greedy_action(state))
    return tuple(state.scores)


def candidates(state: State, scouts_per_way: int = 2, max_combos: int = 4) -> list[Action]:
    """The actions a search considers for the seat to act, `greedy_action`'s choice first:
    every legal Show; for each end and way up, the ``scouts_per_way`` best insert positions;
    the ``max_combos`` best Scout & Shows of two cards or more."""
    seat = state.current_seat
    assert seat is not None
    if PLAYOUT is not None:
        found: list[Action] | None = PLAYOUT.candidates(
            state.faces[seat], state.active, state.num_players, state.scout_show_tokens[seat],
            state.scout_chips[seat], scouts_per_way, max_combos)
        if found is not None:
            return found
    return _candidates(state, scouts_per_way, max_combos)


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


def _candidates(state: State, scouts_per_way: int = 2, max_combos: int = 4) -> list[Action]:
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
