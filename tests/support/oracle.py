"""An independent statement of the rules, written from RULES.md alone, for checking the engine,
the referee's legal lists and the SDK.

Property tests and perft compare the engine's legal actions against these enumerations, the
fuzzing bot the referee's DecisionRequests, the SDK tests the group rules bots use. The code
here must never call the engine's own move generators or group rules (``scout_rules.moves``,
``scout_rules.groups``); from the engine it takes only the action types it speaks in.

The first half works on face values alone (plain ints; a card of an active set is a (face,
other) pair, as it lies): every caller, whatever its types, can reduce its position to these.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from scout_rules import Action, End, Scout, ScoutAndShow, Show, State

L, R = End.LEFT, End.RIGHT

Pair = tuple[int, int]  # a card as it lies: (face in play, other value)
Strength = tuple[int, int, int]
ScoutChoice = tuple[End, bool, int]  # (end, flip, insert_at)
ScoutAndShowChoice = tuple[End, bool, int, int, int]  # (end, flip, insert_at, start, length)


# ----- face values ------------------------------------------------------------------------


def strength(faces: Sequence[int]) -> Strength | None:
    """(cards, 1 for a set / 0 for a run, lowest value), or None if not a group. A set (all
    equal; one card is a set) beats a run (steps all +1 or all -1) of as many cards."""
    n = len(faces)
    if n == 0:
        return None
    if all(f == faces[0] for f in faces):
        return (n, 1, faces[0])
    steps = {b - a for a, b in itertools.pairwise(faces)}
    if steps in ({1}, {-1}):
        return (n, 0, min(faces))
    return None


def _to_beat(table: Sequence[int]) -> Strength | None:
    """The strength a Show must exceed: None for an empty table (anything goes)."""
    if not table:
        return None
    beat = strength(table)
    assert beat is not None, f"the table {list(table)} is not a group"
    return beat


def _stronger(key: Strength | None, beat: Strength | None) -> bool:
    return key is not None and (beat is None or key > beat)


def beats(faces: Sequence[int], table: Sequence[int]) -> bool:
    """``faces`` is a group stronger than the group ``table`` (any group beats an empty one)."""
    return _stronger(strength(faces), _to_beat(table))


def groups_beating(faces: Sequence[int], table: Sequence[int]) -> list[tuple[int, int]]:
    """Every (start, length) of ``faces`` that is a group beating ``table``, ordered by start,
    then length: the legal Shows, in the order the protocol lists them."""
    beat = _to_beat(table)
    return [(s, k) for s in range(len(faces)) for k in range(1, len(faces) - s + 1)
            if _stronger(strength(faces[s : s + k]), beat)]


def may_scout(num_players: int, scout_chips: int, active_size: int) -> bool:
    """There is an active set to scout from, and (2 players) a scout chip left to pay with."""
    return active_size > 0 and (num_players > 2 or scout_chips > 0)


def may_scout_and_show(num_players: int, has_token: bool, active_size: int) -> bool:
    """3+ players, the seat's Scout & Show token unspent, and an active set to scout from."""
    return num_players > 2 and bool(has_token) and active_size > 0


def scout_ends(active_size: int) -> list[End]:
    """The ends a Scout may name: a one-card active set has one distinct end (LEFT)."""
    return [] if active_size == 0 else [L] if active_size == 1 else [L, R]


def scout_choices(hand_size: int, active_size: int) -> list[ScoutChoice]:
    """Every distinct Scout, ordered by end, flip, then insert position."""
    return [(e, f, p) for e in scout_ends(active_size) for f in (False, True)
            for p in range(hand_size + 1)]


def scouted(faces: Sequence[int], active: Sequence[Pair], end: End, flip: bool, at: int
            ) -> tuple[list[int], list[int]]:
    """The hand's faces after taking the card at ``end`` of ``active`` (turned if ``flip``) into
    position ``at``, and the faces left in the active set."""
    face, other = active[0] if end == L else active[-1]
    rest = active[1:] if end == L else active[:-1]
    value = other if flip else face
    return [*faces[:at], value, *faces[at:]], [f for f, _ in rest]


def scout_and_show_choices(faces: Sequence[int], active: Sequence[Pair]
                           ) -> Iterator[ScoutAndShowChoice]:
    """Every Scout & Show (once `may_scout_and_show`): a Scout, then a Show from the new hand
    beating what is left of the active set; ordered by the Scout, then the Show."""
    for end, flip, at in scout_choices(len(faces), len(active)):
        for start, length in groups_beating(*scouted(faces, active, end, flip, at)):
            yield end, flip, at, start, length


# ----- the engine's positions and actions ---------------------------------------------------


def oracle_shows(faces: Sequence[int], table: Sequence[int]) -> set[Show]:
    return {Show(s, k) for s, k in groups_beating(faces, table)}


def oracle_actions(state: State) -> set[Action]:
    """Every distinct legal action, computed from the rules text alone."""
    seat = state.current_seat
    assert seat is not None
    faces = [c.face for c in state.hand(seat)]
    active = [(c.face, c.other) for c in state.active_set]
    n = state.num_players
    out: set[Action] = set(oracle_shows(faces, [f for f, _ in active]))
    if may_scout(n, state.scout_chips[seat], len(active)):
        out |= {Scout(e, f, p) for e, f, p in scout_choices(len(faces), len(active))}
    if may_scout_and_show(n, state.scout_show_tokens[seat], len(active)):
        out |= {ScoutAndShow(Scout(e, f, p), Show(s, k))
                for e, f, p, s, k in scout_and_show_choices(faces, active)}
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
