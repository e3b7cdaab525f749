"""Legal decisions of the seat to act, as ids and as a mask: one definition for both libraries.

The engine's `State.legal_actions()` is the authority; this only translates it. The rotation
phase, which the engine lets every seat answer in any order, is taken in seat order here (the
choices stay secret: nothing a seat observes depends on another seat's choice).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scout_rules import Phase, State

from .actions import KEEP, MAX_GROUP, ROTATE, SHOW_BASE, ActionCodec, Decision, Rotation

Mask = npt.NDArray[np.int8]


def seat_to_decide(state: State) -> int | None:
    """Whose decision it is: the lowest seat still to choose its rotation, else the seat to
    act; None once the match is over."""
    if state.phase is Phase.ROTATION:
        return state.pending_rotations()[0]
    return state.current_seat if state.phase is Phase.PLAY else None


def legal_ids(state: State, codec: ActionCodec) -> list[int]:
    """The ids of the decisions the seat to decide may take, ascending.

    The same as ``codec.encode_all(state.legal_actions())``, inlined because it runs at every
    step: the engine lists Shows by start then length, Scouts by end, flip, position, and
    Scout & Shows by their Scout then their Show, which is id order within each range."""
    if state.phase is Phase.ROTATION:
        return [KEEP, ROTATE]
    if state.phase is Phase.MATCH_OVER:
        return []
    h, group = codec.max_hand, MAX_GROUP
    ids = [SHOW_BASE - 1 + start * group + length for start, length in state.legal_shows()]
    scout_base = codec.scout_base
    ids += [scout_base + (end * 2 + flip) * h + at for end, flip, at in state.legal_scouts()]
    if codec.num_players > 2:
        sas_base, show_ids = codec.sas_base, h * group
        ids += [sas_base + ((end * 2 + flip) * h + at) * show_ids + start * group + length - 1
                for (end, flip, at), (start, length) in state.legal_scout_and_shows()]
    return ids


def legal_mask(state: State, codec: ActionCodec) -> Mask:
    mask = np.zeros(codec.size, np.int8)
    mask[legal_ids(state, codec)] = 1
    return mask


def apply_decision(state: State, decision: Decision) -> None:
    """Play a decision for the seat to decide (the engine checks the action itself)."""
    seat = seat_to_decide(state)
    if seat is None:
        raise ValueError("the match is over; no more decisions are taken")
    if isinstance(decision, Rotation):
        state.choose_rotation(seat, decision.rotate)
    elif state.phase is Phase.ROTATION:
        raise ValueError(f"seat {seat} must choose its rotation, not {decision}")
    else:
        state.apply(decision)
