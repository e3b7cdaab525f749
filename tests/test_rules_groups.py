"""The group helpers (scout_rules.groups) the bundled bots call for every Scout they weigh."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scout_rules import (
    Card,
    Show,
    beats,
    group_strength,
    groups_in,
    hand_potential,
    more_playable_rotated,
)

faces_lists = st.lists(st.integers(1, 10), max_size=12)
# Runs and sets are rare in uniform faces; a narrow range makes them common.
clustered = st.lists(st.integers(4, 7), max_size=12)


def every_beating_slice(faces: list[int], active: list[int]) -> list[Show]:
    """The definition: each slice, checked from scratch."""
    return [Show(start, stop - start)
            for start in range(len(faces)) for stop in range(start + 1, len(faces) + 1)
            if group_strength(faces[start:stop]) is not None
            and beats(faces[start:stop], active)]


@settings(max_examples=400)
@given(st.one_of(faces_lists, clustered), st.one_of(st.lists(st.integers(1, 10), max_size=4),
                                                    st.lists(st.integers(4, 7), max_size=4)))
def test_groups_in_lists_exactly_the_slices_that_are_groups_beating_the_active_set(
        faces: list[int], active: list[int]) -> None:
    assert groups_in(faces, active) == every_beating_slice(faces, active)


@given(st.one_of(faces_lists, clustered))
def test_hand_potential_sums_the_squared_lengths_of_the_multi_card_groups(
        faces: list[int]) -> None:
    assert hand_potential(faces) == sum(s.length ** 2 for s in every_beating_slice(faces, [])
                                        if s.length > 1)


def test_groups_in_finds_runs_both_ways_and_sets_and_stops_at_a_break() -> None:
    assert groups_in([3, 4, 5, 9]) == [Show(0, 1), Show(0, 2), Show(0, 3), Show(1, 1),
                                       Show(1, 2), Show(2, 1), Show(3, 1)]
    assert Show(0, 3) in groups_in([7, 6, 5])
    assert groups_in([2, 2, 2], [9, 9]) == [Show(0, 3)]
    assert groups_in([5, 6], [5, 6]) == []  # equal strength does not beat


def test_a_hand_is_more_playable_rotated_only_when_its_other_faces_group_better() -> None:
    # Turned 180 degrees, the order reverses and each card shows its other face.
    scattered_up = [Card(1, 6), Card(9, 7), Card(3, 8)]  # faces 1 9 3; turned: 8 7 6, a run
    assert more_playable_rotated(scattered_up)
    assert not more_playable_rotated([Card(c.other, c.face) for c in reversed(scattered_up)])
    assert not more_playable_rotated([Card(5, 2), Card(5, 9)])  # a pair beats 9 2
