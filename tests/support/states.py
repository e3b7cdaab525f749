"""Helpers on engine states shared by the rules tests and the property tests."""

from __future__ import annotations

from typing import Any

from scout_rules import State


def snapshot(state: State) -> tuple[Any, ...]:
    """Everything observable about a state: equal snapshots before and after prove that a
    rejected action, or an action applied to a clone, changed nothing."""
    n = state.num_players
    return (
        tuple(state.observation(s) for s in range(n)),
        tuple(state.hand(s) for s in range(n)),
        tuple(tuple(c) for c in state.captured),
        state.active_set,
        state.active_owner,
        state.current_seat,
        state.phase,
        tuple(state.scout_chips),
        tuple(state.scout_show_tokens),
        tuple(state.scores),
        tuple(len(log.actions) for log in state.round_logs),
        tuple(state.round_results),
        tuple(state.cards_in_play()),
    )
