"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): match results and
ranks, the kinds and messages of errors, and what a rejected action or a clone leaves unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from scout_rules import (
    Action,
    IllegalAction,
    MalformedAction,
    OutOfTurn,
    Phase,
    Scout,
    ScoutAndShow,
    ScoutError,
    Show,
    State,
    rank_scores,
)
from support.rules_deals import L, R, build_deals, duel, rejected, start_round, started
from support.states import snapshot


def test_match_score_is_the_sum_of_round_scores_and_equal_scores_share_a_rank() -> None:
    run = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    spec = {r: {r: run} for r in range(5)}  # each round's starting seat empties its hand
    state = State.from_deals(5, build_deals(5, spec))
    for r in range(5):
        start_round(state)
        assert state.current_seat == r
        state.apply(Show(0, 9))
        assert state.round_results[r].scores == tuple(0 if s == r else -9 for s in range(5))
    assert state.is_over and state.phase is Phase.MATCH_OVER
    assert state.scores == [-36] * 5
    assert state.ranks() == (1, 1, 1, 1, 1)
    assert state.ranks(forfeited=[2]) == (1, 1, 5, 1, 1)


def test_match_score_sums_round_scores_in_a_seeded_match() -> None:
    for n in (2, 3, 4, 5):
        state = State.new(n, 5)
        for _ in range(5000):
            if state.is_over:
                break
            start_round(state)
            if state.phase is Phase.PLAY:
                state.apply(state.legal_actions()[0])
        assert state.is_over
        assert len(state.round_results) == n  # n rounds, and 2 with 2 players
        totals = [sum(r.scores[s] for r in state.round_results) for s in range(n)]
        assert state.scores == totals
        assert state.ranks() == rank_scores(totals)


def test_ranks_share_equal_scores_and_skip_the_next_rank() -> None:
    assert rank_scores([5, 3, 5, 1]) == (1, 3, 1, 4)
    assert rank_scores([0, 0]) == (1, 1)
    assert rank_scores([-4, 7, 2]) == (3, 1, 2)


def test_forfeit_ranks_below_every_seat_that_did_not_forfeit() -> None:
    assert rank_scores([10, 3, 5], forfeited=[0]) == (3, 2, 1)
    assert rank_scores([10, -20, 5, 9], forfeited=[0, 3]) == (3, 2, 1, 4)
    assert rank_scores([10, -20, 10, 9], forfeited=[0, 2]) == (3, 2, 3, 1)


def test_no_action_after_the_match_is_over() -> None:
    state = started(5, {r: {r: [1, 2, 3, 4, 5, 6, 7, 8, 9]} for r in range(5)})
    for _ in range(5):
        start_round(state)
        state.apply(Show(0, 9))
    assert state.is_over and state.current_seat is None
    rejected(state, Show(0, 1), OutOfTurn, "the match is over")
    with pytest.raises(OutOfTurn):
        state.legal_actions()
    with pytest.raises(OutOfTurn):
        state.choose_rotation(0, True)
    assert state.pending_rotations() == ()


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (Show(-1, 1), "outside your hand of 11 cards"),
        (Show(0, 0), "at least one card"),
        (Show(0, -2), "at least one card"),
        (Show(10, 2), "positions 10-11 are outside"),
        (Show(11, 1), "outside"),
        (Show(0, 12), "outside"),
        (Show("0", 1), "must be an integer"),  # type: ignore[arg-type]
        (Show(True, 1), "must be an integer"),
        (Scout(L, False, -1), "insert position -1"),
        (Scout(L, False, 12), "insert position 12"),
        (Scout(L, 1, 0), "flip must be true or false"),  # type: ignore[arg-type]
        (Scout(2, False, 0), "LEFT \\(0\\) or RIGHT \\(1\\)"),  # type: ignore[arg-type]
        (ScoutAndShow(Scout(L, False, 0), Show(12, 1)), "outside your hand of 12 cards"),
        (ScoutAndShow(Show(0, 1), Show(0, 1)), "expected a Scout"),  # type: ignore[arg-type]
        ((0, 1), "an action is a Show, a Scout or a ScoutAndShow"),
        (None, "an action is"),
    ],
)
def test_malformed_actions_are_rejected_as_malformed(action: Any, match: str) -> None:
    state = duel(4, [3, 4], [])
    rejected(state, action, MalformedAction, match)
    assert issubclass(MalformedAction, ValueError)


def test_rule_breaks_are_illegal_actions_with_a_reason() -> None:
    state = started(4, {0: {0: [2, 9], 1: [1]}})
    rejected(
        state, Show(0, 2), IllegalAction, "cards 2,9 at positions 0-1 are neither a set nor a run"
    )
    rejected(state, Scout(L, False, 0), IllegalAction, "no active set to scout from")
    state.apply(Show(1, 1))
    assert state.current_seat == 1
    rejected(state, Show(0, 1), IllegalAction, "a single 1 does not beat the active single 9")
    for kind in (IllegalAction, MalformedAction, OutOfTurn):
        assert issubclass(kind, ScoutError)


def test_show_that_does_not_beat_names_both_groups() -> None:
    state = duel(4, [7, 8], [3, 4])
    rejected(
        state, Show(0, 2), IllegalAction, "a 2-card run 3-4 does not beat the active 2-card run 7-8"
    )
    state = duel(4, [7, 8], [2])
    rejected(state, Show(0, 1), IllegalAction, "a single 2 does not beat the active 2-card run")


def test_phase_errors_are_out_of_turn() -> None:
    state = State.from_deals(4, build_deals(4, {}))
    rejected(state, Scout(L, False, 0), OutOfTurn)
    rejected(state, ScoutAndShow(Scout(L, False, 0), Show(0, 1)), OutOfTurn)
    start_round(state)
    with pytest.raises(OutOfTurn):
        state.choose_rotation(0, False)


def test_observation_of_a_missing_seat_is_malformed() -> None:
    state = started(3, {})
    with pytest.raises(MalformedAction):
        state.observation(3)
    with pytest.raises(MalformedAction):
        state.observation(-1)


def test_rejected_actions_leave_the_state_unchanged_in_every_phase() -> None:
    state = started(3, {0: {0: [5, 5], 1: [1, 9, 2]}})
    state.apply(Show(0, 2))
    bad: list[Action] = [
        Show(0, 1),
        Show(0, 2),
        Show(1, 2),
        Show(0, 40),
        Scout(L, False, 13),
        ScoutAndShow(Scout(L, False, 0), Show(0, 3)),
        ScoutAndShow(Scout(R, True, 1), Show(0, 2)),
        ScoutAndShow(Scout(L, False, 0), Show(14, 1)),
    ]
    for action in bad:
        before = snapshot(state)
        clone = state.clone()
        with pytest.raises(ScoutError):
            state.apply(action)
        assert snapshot(state) == before
        assert snapshot(clone) == before
    # The state still plays on normally afterwards.
    state.apply(Scout(L, False, 0))
    assert state.scout_chips == [1, 0, 0]


def test_clone_is_independent() -> None:
    state = duel(3, [5, 6], [])
    clone = state.clone()
    before = snapshot(state)
    clone.apply(Scout(L, True, 0))
    clone.apply(clone.legal_actions()[0])
    assert snapshot(state) == before
    assert snapshot(clone) != before


def test_an_action_checked_before_the_state_changed_is_checked_again_when_applied() -> None:
    """`apply` skips checking the very action `check` just passed, never one checked before the
    state changed: move generation hands out shared action values, so the next seat may be
    given the same Show object that was just played."""
    found = 0
    for seed in range(50):
        state = State.new(4, seed)
        for seat in range(4):
            state.choose_rotation(seat, False)
        while not state.is_over and found < 5:
            action = state.legal_actions()[0]
            state.check(action)
            state.apply(action)
            if state.is_over or state.phase is not Phase.PLAY or state.clone().is_legal(action):
                continue
            with pytest.raises((IllegalAction, MalformedAction)):
                state.apply(action)
            found += 1
    assert found == 5
