"""The greedy playout (`scout_rules.playout.round_scores`): its C core against the Python one.

The C core copies the round into arrays and plays it there; the reference plays the same round
through the engine with `greedy_action`. They must give the same scores from every position:
positions are taken at random points of random matches at every table size, with and without
the round's action limit cutting play short.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scout_rules import Phase, State, playout
from scout_rules._native import PLAYOUT


def position(players: int, seed: int, steps: int) -> State:
    """A random match after random rotations and up to ``steps`` random actions."""
    rng = random.Random(seed)
    state = State.new(players, seed)
    played = 0
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in state.pending_rotations():
                state.choose_rotation(seat, rng.random() < 0.5)
            continue
        if played == steps:
            break
        state.apply(rng.choice(state.legal_actions()))
        played += 1
    return state


def reference(state: State, monkeypatch: pytest.MonkeyPatch) -> tuple[int, ...]:
    with monkeypatch.context() as patch:
        patch.setattr(playout, "PLAYOUT", None)
        return playout.round_scores(state.clone())


def test_the_compiled_playout_and_candidates_are_in_use_where_the_move_generators_are() -> None:
    from scout_rules import moves

    assert playout.COMPILED == moves.COMPILED
    assert (PLAYOUT is not None) == playout.COMPILED


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**32), st.integers(0, 60))
def test_the_compiled_playout_scores_every_position_as_the_engine_does(
        players: int, seed: int, steps: int) -> None:
    state = position(players, seed, steps)
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = reference(state, monkeypatch)
    before = None if state.is_over else state.position()
    assert playout.round_scores(state) == expected
    if playout.COMPILED and before is not None:
        assert state.position() == before  # the C core does not touch the state


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**32), st.integers(0, 12))
def test_a_round_cut_short_by_the_action_limit_scores_the_same_either_way(
        players: int, seed: int, limit_after: int) -> None:
    state = position(players, seed, 4)
    if state.is_over:
        return
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(State, "max_round_actions", state.round_actions + limit_after)
        expected = reference(state, monkeypatch)
        assert playout.round_scores(state.clone()) == expected


def test_the_reference_plays_only_the_round_in_progress() -> None:
    state = position(3, 7, 5)
    index = state.round_index
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(playout, "PLAYOUT", None)
        scores = playout.round_scores(state)
    assert state.round_index == index + 1 and state.phase is Phase.ROTATION
    assert scores == tuple(state.scores)
    assert sum(r.scores[0] for r in state.round_results) == scores[0]


def test_a_finished_match_scores_as_it_stands_and_a_rotation_is_refused() -> None:
    state = State.new(4, 3)
    with pytest.raises(ValueError, match="rotation"):
        playout.round_scores(state)
    finished = position(2, 5, 10_000)
    assert finished.is_over
    assert playout.round_scores(finished) == tuple(finished.scores)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**32), st.integers(0, 60),
       st.integers(0, 4), st.integers(0, 8))
def test_the_compiled_candidates_equal_the_reference_in_order(
        players: int, seed: int, steps: int, per_way: int, combos: int) -> None:
    state = position(players, seed, steps)
    if state.is_over:
        return
    expected = playout._candidates(state, per_way, combos)
    assert playout.candidates(state, per_way, combos) == expected
    assert expected and all(state.is_legal(action) for action in expected)
    assert expected[0] == playout.greedy_action(state)
