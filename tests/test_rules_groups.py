"""The group helpers (scout_rules.groups) the bundled bots call for every Scout they weigh."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scout_rules import Show, beats, group_strength, groups_in, hand_potential

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
