"""Snapshots of a `State`: set one up at a `Position`, read its `Position` back, copy it.

Kept apart from `state` (which calls these) so that the game's transitions read on their own;
each function sets or reads every slot, which a test holds them to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .cards import Hand, face_of, player_count_rules
from .errors import OutOfTurn
from .moves import NO_ACTIVE_SET, group_key
from .position import Position
from .rounds import Phase, RoundLog

if TYPE_CHECKING:
    from .state import State

__all__ = ["copy_state", "position_of", "state_at"]


def state_at(state: State, p: Position) -> State:
    """Every slot of ``state`` set from ``p`` (already checked)."""
    n = p.num_players
    state.rules = player_count_rules(n)
    state.num_players = n
    state.seed = None
    rotations: list[bool | None] = list(p.rotations) if p.rotations else [False] * n
    dealt: tuple[Hand, ...] = ()
    if p.phase is Phase.ROTATION:
        dealt = tuple(Hand(h).rotated() if r else Hand(h)
                      for h, r in zip(p.hands, rotations, strict=True))
        if not p.rotations:
            rotations = [None] * n
    later = tuple(tuple(Hand(h) for h in deal) for deal in p.later_deals) if p.later_deals \
        else ()
    state.deals = ((),) * p.round_index + (dealt,) + later
    state.last_round = p.round_index + len(later)
    state.round_logs = [RoundLog(p.round_index, p.starting_seat, dealt, rotations, [])]
    state.round_results = []
    state.scores = list(p.scores)
    state.last_action = p.history[-1] if p.history else None
    state._checked = None
    state.round_index = p.round_index
    state.starting_seat = p.starting_seat
    state.phase = p.phase
    state.hands = [list(h) for h in p.hands]
    state.faces = [list(map(face_of, h)) for h in p.hands]
    state.active = list(p.active_set)
    state.active_faces = [c.face for c in p.active_set]
    state.active_key = group_key(state.active_faces) if p.active_set else NO_ACTIVE_SET
    state.last_shower = p.active_owner
    state.scouts_since_show = p.scouts_since_show
    state.captured = [list(c) for c in p.captured]
    state.scout_chips = list(p.scout_chips)
    state.scout_show_tokens = list(p.scout_show_tokens)
    state.current_seat = p.current_seat
    state.history = list(p.history)
    state.round_actions = p.round_actions
    return state


def position_of(source: State) -> Position:
    """`State.position`."""
    if source.phase is Phase.MATCH_OVER:
        raise OutOfTurn("the match is over: there is no round in play")
    log = source.round_logs[-1]
    return Position(
        num_players=source.num_players,
        round_index=source.round_index,
        phase=source.phase,
        hands=tuple(Hand(h) for h in source.hands),
        captured=tuple(tuple(c) for c in source.captured),
        scout_chips=tuple(source.scout_chips),
        scout_show_tokens=tuple(source.scout_show_tokens),
        scores=tuple(source.scores),
        current_seat=source.current_seat,
        active_set=tuple(source.active),
        active_owner=source.active_owner,
        scouts_since_show=source.scouts_since_show,
        rotations=tuple(log.rotations),
        history=tuple(source.history),
        actions_played=source.round_actions,
        later_deals=source.deals[source.round_index + 1:source.last_round + 1],
    )


def copy_state(source: State, other: State) -> State:
    """Every slot of ``other`` from ``source``: the immutable values shared, the lists copied."""
    other.rules = source.rules
    other.num_players = source.num_players
    other.seed = source.seed
    other.deals = source.deals
    other.last_round = source.last_round
    other.round_logs = [
        RoundLog(log.round_index, log.starting_seat, log.dealt_hands, list(log.rotations),
                 list(log.actions), log.result)
        for log in source.round_logs
    ]
    other.round_results = list(source.round_results)
    other.scores = list(source.scores)
    other.last_action = source.last_action
    other._checked = source._checked
    other.round_index = source.round_index
    other.starting_seat = source.starting_seat
    other.phase = source.phase
    other.hands = [list(h) for h in source.hands]
    other.faces = [list(f) for f in source.faces]
    other.active = list(source.active)
    other.active_faces = list(source.active_faces)
    other.active_key = source.active_key
    other.last_shower = source.last_shower
    other.scouts_since_show = source.scouts_since_show
    other.captured = [list(c) for c in source.captured]
    other.scout_chips = list(source.scout_chips)
    other.scout_show_tokens = list(source.scout_show_tokens)
    other.current_seat = source.current_seat
    other.history = list(source.history)
    other.round_actions = source.round_actions
    return other
