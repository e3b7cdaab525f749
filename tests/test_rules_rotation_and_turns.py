"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): hand rotation and the
order of turns."""

from __future__ import annotations

import pytest
from scout_rules import (
    Card,
    Hand,
    MalformedAction,
    OutOfTurn,
    Phase,
    Show,
    State,
)
from support.rules_deals import build_deals, faces, rejected, start_round, started


def test_rotation_reverses_the_order_and_turns_every_card() -> None:
    dealt = [Card(1, 2), Card(3, 9), Card(8, 4), Card(5, 6)]
    state = State.from_deals(4, build_deals(4, {0: {0: dealt}}))
    original = list(state.hand(0))
    state.choose_rotation(0, True)
    rotated = list(state.hand(0))
    assert rotated == [Card(c.other, c.face) for c in reversed(original)]
    assert rotated[-4:] == [Card(6, 5), Card(4, 8), Card(9, 3), Card(2, 1)]
    assert Hand(original).rotated() == Hand(rotated)
    for seat in (1, 2, 3):
        state.choose_rotation(seat, False)
    assert state.phase is Phase.PLAY
    assert list(state.hand(0)) == rotated
    assert list(state.hand(1)) == list(state.deals[0][1])


def test_rotation_changes_what_can_be_shown() -> None:
    # Faces 1 2 3 on the left; rotated they come to the right end, turned: 4 3 2.
    dealt = [Card(1, 2), Card(2, 3), Card(3, 4)]  # faces 1 2 3, others 2 3 4
    state = started(4, {0: {0: dealt}}, rotate=[0])
    assert faces(state, 0)[-3:] == [4, 3, 2]
    assert state.is_legal(Show(8, 3))  # 4-3-2, a descending run
    plain = started(4, {0: {0: dealt}})
    assert faces(plain, 0)[:3] == [1, 2, 3]
    assert plain.is_legal(Show(0, 3))


def test_rotation_is_chosen_once_per_seat() -> None:
    state = State.from_deals(3, build_deals(3, {}))
    state.choose_rotation(1, True)
    with pytest.raises(OutOfTurn, match="already chosen"):
        state.choose_rotation(1, False)
    assert state.pending_rotations() == (0, 2)
    state.choose_rotation(0, False)
    state.choose_rotation(2, False)
    assert state.pending_rotations() == ()
    with pytest.raises(OutOfTurn, match="before a round's first turn"):
        state.choose_rotation(0, True)


def test_rotation_choice_arguments_are_checked() -> None:
    state = State.from_deals(3, build_deals(3, {}))
    with pytest.raises(MalformedAction, match="seat 3 does not exist"):
        state.choose_rotation(3, True)
    with pytest.raises(MalformedAction, match="true or false"):
        state.choose_rotation(0, 1)  # type: ignore[arg-type]
    assert state.pending_rotations() == (0, 1, 2)


def test_rotation_choice_is_secret_from_the_other_seats() -> None:
    deals = build_deals(4, {})
    rotated, kept = State.from_deals(4, deals), State.from_deals(4, deals)
    rotated.choose_rotation(0, True)
    kept.choose_rotation(0, False)
    for seat in (1, 2, 3):
        assert rotated.observation(seat) == kept.observation(seat)
    assert rotated.observation(0).rotation_chosen
    assert not rotated.observation(1).rotation_chosen
    for state in (rotated, kept):
        for seat in (1, 2, 3):
            state.choose_rotation(seat, False)
    for seat in (1, 2, 3):
        assert rotated.observation(seat) == kept.observation(seat)
    assert rotated.observation(0) != kept.observation(0)


def test_no_turn_is_played_before_every_seat_has_chosen_its_rotation() -> None:
    state = State.from_deals(3, build_deals(3, {}))
    state.choose_rotation(0, False)
    state.choose_rotation(1, False)
    assert state.phase is Phase.ROTATION
    assert state.current_seat is None
    rejected(state, Show(0, 1), OutOfTurn, "must still choose their rotation")
    with pytest.raises(OutOfTurn):
        state.legal_actions()
    state.choose_rotation(2, True)
    # mypy keeps the narrowing of the assert above across choose_rotation().
    assert state.phase is Phase.PLAY  # type: ignore[comparison-overlap]
    assert state.current_seat == 0


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_starting_seat_moves_to_the_next_seat_each_round(n: int) -> None:
    state = State.new(n, 11)
    seen = []
    for _ in range(5000):  # a bound, so that a broken round end fails instead of hanging
        if state.is_over:
            break
        if state.phase is Phase.ROTATION:
            r = state.round_index
            assert state.starting_seat == r % n
            start_round(state)
            assert state.current_seat == r % n
            seen.append(r)
            continue
        state.apply(state.legal_actions()[0])
    assert state.is_over
    assert seen == list(range(n))
    assert [log.starting_seat for log in state.round_logs] == [r % n for r in range(n)]
    assert len(state.round_results) == n


def test_play_passes_to_the_next_seat_and_wraps() -> None:
    state = started(3, {0: {0: [1, 4], 1: [2], 2: [3]}})
    order = []
    for _ in range(4):
        order.append(state.current_seat)
        state.apply(Show(0, 1))
    assert order == [0, 1, 2, 0]
    assert state.current_seat == 1
    assert [c.face for c in state.active_set] == [4]
