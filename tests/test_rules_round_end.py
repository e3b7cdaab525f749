"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): the end of a round and
its scoring with 3 to 5 players."""

from __future__ import annotations

from scout_rules import (
    Phase,
    RoundEnd,
    Scout,
    ScoutAndShow,
    Show,
    State,
)
from support.rules_deals import L, R, started


def test_round_ends_at_once_when_a_show_empties_a_hand() -> None:
    state = started(5, {0: {0: [1, 2, 3, 4, 5, 6, 7, 8, 9]}})
    state.apply(Show(0, 9))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.HAND_EMPTIED
    assert result.exempt_seat is None
    assert result.scores == (0, -9, -9, -9, -9)  # round scores can be negative
    assert state.scores == [0, -9, -9, -9, -9]
    assert state.phase is Phase.ROTATION and state.round_index == 1


def test_unbeaten_show_ends_the_round_and_its_owner_skips_the_hand_penalty() -> None:
    state = started(3, {0: {0: [4, 4, 4]}})
    state.apply(Show(0, 3))
    state.apply(Scout(L, False, 0))
    assert not state.round_results
    state.apply(Scout(L, False, 0))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.UNBEATEN_SHOW
    assert result.exempt_seat == 0
    assert result.captured == (0, 0, 0)
    assert result.scout_chips == (2, 0, 0)
    assert [len(h) for h in result.hands] == [9, 13, 13]
    assert result.scores == (2, -13, -13)  # 9 cards in seat 0's hand do not count
    assert sum(len(h) for h in result.hands) + 1 == 36  # one card stays active, unscored


def test_unbeaten_show_ends_the_round_even_if_the_scouts_emptied_the_active_set() -> None:
    state = started(3, {0: {0: [6, 7]}})
    state.apply(Show(0, 2))
    state.apply(Scout(L, False, 0))
    state.apply(Scout(L, False, 0))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.UNBEATEN_SHOW
    assert result.exempt_seat == 0
    assert result.scores == (2, -13, -13)


def test_unbeaten_show_needs_every_other_player_to_scout() -> None:
    state = started(4, {0: {0: [6, 7]}})
    state.apply(Show(0, 2))
    state.apply(Scout(L, False, 0))
    state.apply(Scout(L, False, 0))  # the table is now clear
    assert not state.round_results
    assert state.current_seat == 3
    assert state.legal_scouts() == []  # seat 3 must Show
    state.apply(Show(0, 1))
    assert state.active_owner == 3


def test_a_show_restarts_the_count_of_scouts() -> None:
    state = started(4, {0: {0: [2, 3], 2: [5, 6]}})
    state.apply(Show(0, 2))
    state.apply(Scout(L, False, 0))  # seat 1 scouts seat 0's show
    state.apply(Show(0, 2))  # seat 2 beats the remaining 3
    state.apply(Scout(L, False, 0))  # seat 3
    state.apply(Scout(L, False, 0))  # seat 0: three scouts in a row, but not of one show
    assert not state.round_results
    assert state.current_seat == 1
    assert state.scout_chips == [1, 0, 2, 0]


def test_scout_and_show_restarts_the_count_and_makes_a_new_owner() -> None:
    state = started(3, {0: {0: [2, 3], 2: [5, 6]}})
    state.apply(Show(0, 2))
    state.apply(Scout(L, False, 0))  # seat 1 scouts: one of two scouts needed
    state.apply(ScoutAndShow(Scout(L, False, 12), Show(0, 2)))  # seat 2: not a plain scout
    assert not state.round_results
    assert state.active_owner == 2
    assert state.scout_chips == [2, 0, 0]
    state.apply(Scout(L, False, 0))  # seat 0
    state.apply(Scout(L, False, 0))  # seat 1
    assert state.round_results[0].end_reason is RoundEnd.UNBEATEN_SHOW
    assert state.round_results[0].exempt_seat == 2


def test_round_that_reaches_the_action_limit_ends_with_no_exempt_seat() -> None:
    """Engine decision (not in the seeds): single Shows, each scouted back, can cycle for ever,
    so a round ends when it reaches `State.max_round_actions` actions, scored as it stands."""
    state = started(3, {})
    limit = State.max_round_actions
    assert limit == 1000
    for _ in range(limit - 1):
        if state.active_set:
            state.apply(Scout(L, False, len(state.hand(state.current_seat or 0))))
        else:
            state.apply(Show(0, 1))
    assert not state.round_results  # the cycle never ends the round by itself
    assert len(state.active_set) == 1
    state.apply(Scout(L, False, 0))  # the 1000th action: one Scout, no unbeaten Show yet
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.ACTION_LIMIT
    assert len(state.round_logs[0].actions) == limit
    assert result.exempt_seat is None
    assert result.captured == (0, 0, 0)
    for seat in range(3):
        assert result.scores[seat] == result.scout_chips[seat] - len(result.hands[seat])
    assert sum(result.scout_chips) == limit // 2
    assert state.round_index == 1 and state.phase is Phase.ROTATION


def _scoring_example(exempt: bool) -> State:
    """3 players. Seat X ends the round with 7 captured cards, 2 Scout chips, 4 hand cards."""
    if not exempt:
        # X = seat 2. Seat 1 ends the round by emptying its hand.
        state = started(
            3,
            {
                0: {
                    0: [1, 2, 3],
                    1: [2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5],
                    2: [3, 4, 5, 4, 5, 6, 7, 8],
                }
            },
        )
        state.apply(Show(0, 3))  # seat 0: 1-2-3
        state.apply(Show(0, 3))  # seat 1: 2-3-4, captures 3
        state.apply(Show(0, 3))  # seat 2: 3-4-5, captures 3
        state.apply(Scout(R, False, 9))  # seat 0 scouts X's 5: X's first chip
        state.apply(Show(0, 4))  # seat 1: 5-6-7-8 beats the remaining 3-4, captures 2
        state.apply(Show(0, 5))  # seat 2: 4-5-6-7-8 beats 5-6-7-8, captures 4 (7 in all)
        state.apply(Scout(L, False, 0))  # seat 0 scouts X's 4: X's second chip
        state.apply(Show(0, 5))  # seat 1: 1-2-3-4-5 beats the 4 left and empties its hand
        return state
    # X = seat 0; the others Scout X's last show, so X is exempt.
    state = started(
        3, {0: {0: [9, 3, 4, 5, 3, 4, 5, 6], 1: [1, 2, 3, 1, 2, 3, 4], 2: [2, 3, 4, 2, 3, 4, 5]}}
    )
    state.apply(Show(0, 1))  # X: a single 9
    state.apply(Show(0, 3))  # 1-2-3 captures 1
    state.apply(Show(0, 3))  # 2-3-4 captures 3
    state.apply(Show(0, 3))  # X: 3-4-5 captures 3
    state.apply(Show(0, 4))  # 1-2-3-4 captures 3
    state.apply(Show(0, 4))  # 2-3-4-5 captures 4
    state.apply(Show(0, 4))  # X: 3-4-5-6 captures 4 (7 in all)
    state.apply(Scout(L, False, 0))
    state.apply(Scout(L, False, 0))
    return state


def test_scoring_worked_example_seven_captured_two_chips_four_in_hand_scores_five() -> None:
    state = _scoring_example(exempt=False)
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.HAND_EMPTIED
    assert (result.captured[2], result.scout_chips[2], len(result.hands[2])) == (7, 2, 4)
    assert result.scores[2] == 7 + 2 - 4 == 5
    assert result.captured == (0, 9, 7)
    assert result.scores == (0 + 0 - 11, 9, 5)


def test_scoring_worked_example_unbeaten_show_owner_scores_nine_with_four_in_hand() -> None:
    state = _scoring_example(exempt=True)
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.UNBEATEN_SHOW
    assert result.exempt_seat == 0
    assert (result.captured[0], result.scout_chips[0], len(result.hands[0])) == (7, 2, 4)
    assert result.scores[0] == 7 + 2 == 9


def test_active_set_scores_nothing_and_an_unused_token_scores_nothing() -> None:
    state = _scoring_example(exempt=True)
    result = state.round_results[0]
    # 36 cards: in hands, captured, or the 2 cards left of X's show (scoring nothing).
    assert sum(result.captured) + sum(len(h) for h in result.hands) == 36 - 2
    for seat in range(3):
        penalty = 0 if seat == 0 else len(result.hands[seat])
        assert result.scores[seat] == result.captured[seat] + result.scout_chips[seat] - penalty
