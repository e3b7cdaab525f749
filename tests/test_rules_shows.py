"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): Shows: what a group is
and which group beats which."""

from __future__ import annotations

import pytest
from scout_rules import (
    IllegalAction,
    Show,
    group_key,
)
from support.rules_deals import duel, rejected, started


def test_single_card_is_a_set_showable_from_any_position() -> None:
    state = started(4, {})
    for pos in range(11):
        assert state.is_legal(Show(pos, 1))
    assert group_key([7]) > group_key([6])
    assert group_key([7]) & 16  # the set bit
    # A single beats a lower single, not an equal one.
    state = duel(4, [6], [7, 1, 6])
    assert state.is_legal(Show(0, 1))
    assert not state.is_legal(Show(2, 1))
    assert not state.is_legal(Show(1, 1))


def test_adjacent_pair_and_run_but_not_scattered_cards_example_3_3_4_5_8() -> None:
    state = started(4, {0: {0: [3, 3, 4, 5, 8]}})
    assert state.is_legal(Show(0, 2))  # the adjacent 3-3 pair
    assert state.is_legal(Show(1, 3))  # the adjacent run 3-4-5
    for bad in (Show(0, 3), Show(3, 2), Show(0, 5), Show(2, 3)):
        rejected(state, bad, IllegalAction, "neither a set nor a run")
    multi = {s for s in state.legal_shows() if s.start + s.length <= 5 and s.length > 1}
    assert multi == {Show(0, 2), Show(1, 2), Show(2, 2), Show(1, 3)}


@pytest.mark.parametrize(
    "cards", [[3, 5, 7], [3, 4, 6], [3, 4, 3], [5, 4, 5], [2, 2, 3], [4, 5, 5], [1, 3]]
)
def test_group_must_be_a_set_or_a_strictly_consecutive_run(cards: list[int]) -> None:
    state = started(5, {0: {0: cards}})
    rejected(state, Show(0, len(cards)), IllegalAction, "neither a set nor a run")


@pytest.mark.parametrize("cards", [[3, 4, 5], [8, 7, 6], [7, 7, 7], [1, 2], [10, 9], [6, 6]])
def test_sets_and_ascending_or_descending_runs_are_groups(cards: list[int]) -> None:
    state = started(5, {0: {0: cards}})
    assert state.is_legal(Show(0, len(cards)))
    state.apply(Show(0, len(cards)))
    assert [c.face for c in state.active_set] == cards


def test_example_1_four_card_run_beats_three_card_set() -> None:
    state = duel(4, [8, 8, 8], [1, 2, 3, 4])
    assert state.is_legal(Show(0, 4))
    rejected(state, Show(0, 3), IllegalAction, "does not beat")  # the 1-2-3 part alone loses


def test_four_card_run_beats_even_three_tens() -> None:
    state = duel(5, [10, 10, 10], [1, 2, 3, 4])
    assert state.is_legal(Show(0, 4))


def test_longer_low_group_beats_shorter_high_group() -> None:
    state = duel(5, [10], [2, 1])
    assert state.is_legal(Show(0, 2))
    state = duel(5, [9, 9], [1, 2, 3])
    assert state.is_legal(Show(0, 3))


def test_shorter_group_never_beats_a_longer_one() -> None:
    state = duel(5, [1, 2, 3], [10, 10, 9, 10])
    rejected(state, Show(0, 2), IllegalAction, "does not beat")
    rejected(state, Show(3, 1), IllegalAction, "does not beat")


def test_example_2_three_card_set_beats_three_card_run() -> None:
    state = duel(4, [6, 7, 8], [2, 2, 2])
    assert state.is_legal(Show(0, 3))


def test_run_never_beats_a_set_of_the_same_size() -> None:
    state = duel(5, [2, 2, 2], [8, 9, 10])
    rejected(
        state,
        Show(0, 3),
        IllegalAction,
        "a 3-card run 8-9-10 does not beat the active 3-card set 2-2-2",
    )


def test_example_3_higher_lowest_value_wins_between_runs() -> None:
    state = duel(4, [3, 4, 5], [4, 5, 6])
    assert state.is_legal(Show(0, 3))
    state = duel(4, [4, 5, 6], [3, 4, 5])
    rejected(state, Show(0, 3), IllegalAction, "does not beat")


def test_higher_set_beats_lower_set_of_the_same_size() -> None:
    state = duel(4, [6, 6], [8, 8])
    assert state.is_legal(Show(0, 2))
    state = duel(4, [8, 8], [6, 6])
    rejected(state, Show(0, 2), IllegalAction, "does not beat")


def test_runs_compare_by_lowest_value_not_highest() -> None:
    # 5-6-7 beats 3-4-5; a descending 8-7-6 (lowest 6) beats 5-6-7; 4-5-6 does not beat 8-7-6.
    assert duel(4, [3, 4, 5], [5, 6, 7]).is_legal(Show(0, 3))
    assert duel(4, [5, 6, 7], [8, 7, 6]).is_legal(Show(0, 3))
    assert not duel(4, [8, 7, 6], [4, 5, 6]).is_legal(Show(0, 3))
    assert not duel(4, [6, 7, 8], [7, 6, 5]).is_legal(Show(0, 3))


def test_example_4_equal_strength_does_not_beat() -> None:
    state = duel(4, [5, 5], [5, 5])
    rejected(
        state, Show(0, 2), IllegalAction, "a 2-card set 5-5 does not beat the active 2-card set 5-5"
    )


def test_ascending_and_descending_runs_with_the_same_lowest_value_tie() -> None:
    rejected(duel(4, [3, 4, 5], [5, 4, 3]), Show(0, 3), IllegalAction, "does not beat")
    rejected(duel(4, [5, 4, 3], [3, 4, 5]), Show(0, 3), IllegalAction, "does not beat")


def test_show_on_an_empty_table_may_be_any_group() -> None:
    state = started(4, {0: {0: [1]}})
    assert state.active_set == ()
    assert state.is_legal(Show(0, 1))  # the weakest possible group


def test_show_captures_the_former_active_set_and_becomes_the_active_set() -> None:
    state = started(4, {0: {0: [2, 3], 1: [5, 5]}})
    table = list(state.hand(0))[:2]
    mine = list(state.hand(1))[:2]
    state.apply(Show(0, 2))
    assert list(state.active_set) == table
    assert state.active_owner == 0
    assert state.observation(2).captured_counts == (0, 0, 0, 0)  # a first show captures nothing
    assert len(state.hand(0)) == 9
    state.apply(Show(0, 2))
    assert state.captured[1] == table
    assert list(state.active_set) == mine
    assert state.active_owner == 1
    assert state.observation(0).captured_counts == (0, 2, 0, 0)
    assert len(state.hand(1)) == 9
    assert state.current_seat == 2
