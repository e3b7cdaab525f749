"""The `State`'s transitions that happen once a round or once a seat, out of the per-action path.

Kept apart from `state` (which calls these) so that the class reads as the hot path it is:
move generation, `check` and `apply`. A round's end, a rotation choice and a seat's observation
are each taken a few times a round, so the extra call costs nothing measurable here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .actions import End, Scout, Show
from .cards import Hand, face_of
from .errors import IllegalAction, MalformedAction, OutOfTurn
from .moves import NO_ACTIVE_SET, check_show, group_key, scouted_card
from .observation import Observation, new_observation
from .rounds import Phase, RoundEnd, RoundResult

if TYPE_CHECKING:
    from .state import State

__all__ = [
    "cards_in_play",
    "check_scout_allowed",
    "check_scout_and_show",
    "choose_rotation",
    "end_round",
    "not_acting",
    "observation_of",
    "pending_rotations",
    "plainly_legal_scout_and_show",
]

_LEFT, _RIGHT = End.LEFT, End.RIGHT

def end_round(state: State, reason: RoundEnd, exempt: int | None) -> None:
    """Score the round, log its result, and deal the next round or end the match."""
    n = state.num_players
    captured = tuple(len(c) for c in state.captured)
    chips = tuple(state.scout_chips)
    scores = tuple(
        captured[s] + chips[s] - (0 if s == exempt else len(state.hands[s])) for s in range(n)
    )
    result = RoundResult(state.round_index, reason, exempt, captured, chips,
                         tuple(Hand(h) for h in state.hands), scores, tuple(state.active),
                         state.active_owner, tuple(state.scout_show_tokens))
    state.round_results.append(result)
    state.round_logs[-1].result = result
    for s in range(n):
        state.scores[s] += scores[s]
    if state.round_index < state.last_round:
        state._start_round(state.round_index + 1)
    else:
        state.phase = Phase.MATCH_OVER
        state.current_seat = None

def choose_rotation(state: State, seat: int, rotate: bool) -> None:
    """`State.choose_rotation`."""
    state._checked = None
    if state.phase is not Phase.ROTATION:
        raise OutOfTurn("rotation is chosen only before a round's first turn")
    if not 0 <= seat < state.num_players:
        raise MalformedAction(
            f"seat {seat} does not exist in a {state.num_players}-player match")
    if not isinstance(rotate, bool):
        raise MalformedAction(f"a rotation choice is true or false, got {rotate!r}")
    rotations = state.round_logs[-1].rotations
    if rotations[seat] is not None:
        raise OutOfTurn(f"seat {seat} has already chosen its rotation this round")
    rotations[seat] = rotate
    if rotate:
        state.hands[seat] = list(Hand(state.hands[seat]).rotated())
        state.faces[seat] = list(map(face_of, state.hands[seat]))
    if all(r is not None for r in rotations):
        state.phase = Phase.PLAY
        state.current_seat = state.starting_seat

def pending_rotations(state: State) -> tuple[int, ...]:
    """`State.pending_rotations`."""
    if state.phase is not Phase.ROTATION:
        return ()
    return tuple(s for s, r in enumerate(state.round_logs[-1].rotations) if r is None)


def not_acting(state: State) -> OutOfTurn:
    """Why no seat may act now (the state is not in a round's play)."""
    if state.phase is Phase.ROTATION:
        return OutOfTurn(
            f"round {state.round_index + 1} has not started: seats "
            f"{list(pending_rotations(state))} must still choose their rotation"
        )
    return OutOfTurn("the match is over; no more actions are taken")


def check_scout_allowed(state: State, seat: int) -> None:
    """Raise IllegalAction unless ``seat`` may Scout at all now."""
    if not state.active:
        raise IllegalAction("there is no active set to scout from; you must Show")
    if state.num_players == 2 and state.scout_chips[seat] == 0:
        raise IllegalAction("you have spent all 3 Scout chips this round; you must Show")


def observation_of(state: State, seat: int) -> Observation:
    """`State.observation`: public counters and that seat's own hand, copied."""
    n = state.num_players
    if not 0 <= seat < n:
        raise MalformedAction(f"seat {seat} does not exist in a {n}-player match")
    return new_observation(
        seat, n, state.rules.rounds, state.round_index, state.starting_seat, state.phase,
        Hand(state.hands[seat]), state.round_logs[-1].rotations[seat] is not None,
        tuple(map(len, state.hands)), tuple(state.active), state.active_owner,
        tuple(map(len, state.captured)), tuple(state.scout_chips),
        tuple(state.scout_show_tokens), tuple(state.scores), state.current_seat,
        tuple(state.history))

def check_scout_and_show(state: State, seat: int, scout: Scout, show: Show) -> None:
    """`State.check`'s verdict on a Scout & Show whose two parts are well formed."""
    if state.num_players == 2:
        raise IllegalAction("Scout & Show is not part of the 2-player game")
    if not state.scout_show_tokens[seat]:
        raise IllegalAction("you have already used your Scout & Show this round")
    check_scout_allowed(state, seat)
    card = scouted_card(state.active, scout)
    faces = state.faces[seat]
    new_faces = [*faces[: scout.insert_at], card.face, *faces[scout.insert_at :]]
    rest = state.active_faces[1:] if scout.end == End.LEFT else state.active_faces[:-1]
    check_show(new_faces, show, rest)

def plainly_legal_scout_and_show(state: State, seat: int, scout: object, show: object) -> bool:
    """`State._plainly_legal` for a Scout & Show (rare: 3 players or more, once a round)."""
    if (type(scout) is not Scout or type(show) is not Show or state.num_players == 2
            or not state.scout_show_tokens[seat] or not state.active):
        return False
    faces = state.faces[seat]
    size = len(faces)
    end, flip, at = scout
    start, length = show
    if not ((end is _LEFT or end is _RIGHT) and (flip is True or flip is False)
            and type(at) is int and 0 <= at <= size and type(start) is int
            and type(length) is int and length >= 1 and start >= 0
            and start + length <= size + 1):
        return False
    taken = state.active[0] if end is _LEFT else state.active[-1]
    grown = [*faces[:at], taken.other if flip else taken.face, *faces[at:]]
    rest = state.active_faces[1:] if end is _LEFT else state.active_faces[:-1]
    beat = group_key(rest) if rest else NO_ACTIVE_SET
    return group_key(grown[start:start + length]) > beat

def cards_in_play(state: State) -> list[tuple[int, int]]:
    """`State.cards_in_play`: every card of the round wherever it is, as deck pairs."""
    out = [c.pair for h in state.hands for c in h]
    out += [c.pair for cs in state.captured for c in cs]
    out += [c.pair for c in state.active]
    return out
