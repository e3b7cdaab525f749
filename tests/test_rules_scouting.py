"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): Scouts and Scout &
Show."""

from __future__ import annotations

from scout_rules import (
    Card,
    IllegalAction,
    MalformedAction,
    RoundEnd,
    Scout,
    ScoutAndShow,
    Show,
)
from support.rules_deals import L, R, duel, faces, rejected, started


def test_scout_takes_only_the_leftmost_or_rightmost_active_card() -> None:
    table = [Card(4, 9), Card(5, 8), Card(6, 10)]
    state = duel(5, table, [])
    taken = set()
    for scout in state.legal_scouts():
        trial = state.clone()
        before = list(trial.hand(1))
        trial.apply(scout)
        after = list(trial.hand(1))
        new = after[scout.insert_at]
        assert after[: scout.insert_at] + after[scout.insert_at + 1 :] == before
        taken.add(new.pair)
        rest = list(trial.active_set)
        assert rest == (table[1:] if scout.end == L else table[:-1])
    assert taken == {(4, 9), (6, 10)}  # the middle card (5, 8) can never be scouted
    assert {s.end for s in state.legal_scouts()} == {L, R}


def test_scout_may_turn_the_card_either_way() -> None:
    state = duel(4, [Card(3, 8)], [])
    kept, turned = state.clone(), state.clone()
    kept.apply(Scout(L, False, 0))
    turned.apply(Scout(L, True, 0))
    assert kept.hand(1)[0] == Card(3, 8)
    assert turned.hand(1)[0] == Card(8, 3)


def test_scout_inserts_into_any_gap_without_moving_other_cards() -> None:
    state = duel(4, [Card(3, 8)], [])
    before = list(state.hand(1))
    positions = {s.insert_at for s in state.legal_scouts()}
    assert positions == set(range(len(before) + 1))
    for pos in positions:
        trial = state.clone()
        trial.apply(Scout(L, False, pos))
        assert list(trial.hand(1)) == [*before[:pos], Card(3, 8), *before[pos:]]


def test_example_4_5_7_scouted_6_turned_and_inserted_makes_a_four_card_run() -> None:
    # The 6 is on the table as 2/6: it must be turned to 6 and put between 5 and 7.
    state = started(3, {0: {0: [Card(2, 6)], 1: [4, 5, 7]}})
    state.apply(Show(0, 1))
    assert not state.clone().is_legal(Show(0, 3))  # 4-5-7 is not a run
    wrong = state.clone()
    wrong.apply(Scout(L, False, 2))
    assert faces(wrong, 1)[:4] == [4, 5, 2, 7]
    state.apply(Scout(L, True, 2))
    assert faces(state, 1)[:4] == [4, 5, 6, 7]
    assert state.active_set == ()  # that was the last active card: the table is clear
    state.apply(Show(0, 1))  # seat 2 shows a single
    state.apply(state.legal_scouts()[0])  # seat 0 scouts it
    assert state.current_seat == 1
    assert state.is_legal(Show(0, 4))
    state.apply(Show(0, 4))
    # mypy keeps the narrowing to () of the assert above across apply().
    assert [c.face for c in state.active_set] == [4, 5, 6, 7]  # type: ignore[var-annotated]


def test_scout_needs_an_active_set() -> None:
    state = started(4, {})
    assert state.legal_scouts() == []
    rejected(state, Scout(L, False, 0), IllegalAction, "no active set")


def test_scouting_the_last_active_card_clears_the_table_for_any_show() -> None:
    state = duel(4, [10], [])
    state.apply(Scout(L, False, 0))
    assert state.active_set == ()
    assert state.active_owner is None
    assert state.current_seat == 2
    assert state.legal_scouts() == []
    # With the table clear every single card of seat 2's hand may be shown, even the lowest.
    assert {s for s in state.legal_shows() if s.length == 1} == {Show(i, 1) for i in range(11)}


def test_one_card_active_set_has_a_single_distinct_end() -> None:
    state = duel(4, [Card(3, 8)], [])
    assert {s.end for s in state.legal_scouts()} == {L}
    # Naming the right end is the same card, and is accepted.
    right, left = state.clone(), state.clone()
    right.apply(Scout(R, True, 4))
    left.apply(Scout(L, True, 4))
    assert right.hand(1) == left.hand(1)
    assert right.active_set == left.active_set == ()


def test_scout_gives_the_active_set_owner_a_chip_and_ends_the_turn_with_3_to_5_players() -> None:
    for n in (3, 4, 5):
        state = started(n, {0: {0: [2, 3, 4]}})
        state.apply(Show(0, 3))
        state.apply(Scout(R, False, 0))
        assert state.observation(0).scout_chips == (1,) + (0,) * (n - 1)
        assert state.current_seat == 2
        state.apply(Scout(L, True, 3))
        if n == 3:  # both other players scouted: the round is over (see the unbeaten show)
            assert state.round_results[0].scout_chips == (2, 0, 0)
        else:
            # The chips come from an unlimited supply, not from the scouting players.
            assert state.scout_chips == [2] + [0] * (n - 1)
            assert state.current_seat == 3


def test_scout_insert_position_outside_the_hand_is_malformed() -> None:
    state = duel(4, [5], [])
    rejected(state, Scout(L, False, 12), MalformedAction, "outside 0-11")
    rejected(state, Scout(L, False, -1), MalformedAction, "outside 0-11")
    assert state.is_legal(Scout(L, False, 11))


def test_scout_and_show_with_the_scouted_card_in_the_show() -> None:
    state = started(3, {0: {0: [Card(2, 6)], 1: [4, 5, 7]}})
    state.apply(Show(0, 1))
    action = ScoutAndShow(Scout(L, True, 2), Show(0, 4))
    assert state.can_scout_and_show()
    assert action in state.legal_scout_and_shows()
    state.apply(action)
    assert [c.face for c in state.active_set] == [4, 5, 6, 7]
    assert state.active_owner == 1
    assert state.scout_chips[0] == 1  # the owner of the scouted set gets the chip
    assert state.captured[1] == []  # the scouted card was the whole active set: nothing left
    assert state.scout_show_tokens == [True, False, True]
    assert state.current_seat == 2
    assert len(state.hand(1)) == 12 + 1 - 4


def test_scout_and_show_must_beat_what_remains_of_the_active_set() -> None:
    table = [Card(5, 1), Card(5, 2), Card(5, 3)]
    state = duel(3, table, [6, 6, Card(5, 4)])
    rejected(state, Show(0, 2), IllegalAction, "does not beat")  # 6-6 does not beat 5-5-5
    beat_rest = ScoutAndShow(Scout(R, True, 12), Show(0, 2))
    assert state.is_legal(beat_rest)  # but 6-6 beats the 5-5 that remains
    # A 5-5 made with the scouted 5 only equals the remaining 5-5.
    tie = ScoutAndShow(Scout(L, False, 3), Show(2, 2))
    rejected(state, tie, IllegalAction, "a 2-card set 5-5 does not beat the active 2-card set 5-5")
    state.apply(beat_rest)
    assert state.captured[1] == table[:2]  # the remaining active cards are captured
    assert state.hand(1)[-1] == Card(3, 5)  # the scouted card, turned, went into the hand
    assert state.scout_chips == [1, 0, 0]


def test_scout_and_show_emptying_the_active_set_allows_any_show() -> None:
    state = duel(3, [9], [1])
    action = ScoutAndShow(Scout(L, False, 5), Show(0, 1))  # shows the 1, lower than the 9
    assert state.is_legal(action)
    assert not state.is_legal(Show(0, 1))
    state.apply(action)
    assert [c.face for c in state.active_set] == [1]
    assert state.captured[1] == []


def test_scout_and_show_show_positions_refer_to_the_hand_after_the_scout() -> None:
    state = duel(3, [Card(9, 2)], [])
    assert len(state.hand(1)) == 12
    assert state.is_legal(ScoutAndShow(Scout(L, False, 12), Show(12, 1)))  # the scouted 9
    rejected(
        state,
        ScoutAndShow(Scout(L, False, 12), Show(13, 1)),
        MalformedAction,
        "outside your hand of 13 cards",
    )
    trial = state.clone()
    trial.apply(ScoutAndShow(Scout(L, False, 0), Show(0, 1)))
    assert trial.active_set == (Card(9, 2),)
    assert len(trial.hand(1)) == 12


def test_scout_and_show_is_atomic_an_illegal_show_part_changes_nothing() -> None:
    state = duel(4, [8, 8], [1, 3])
    action = ScoutAndShow(Scout(L, False, 0), Show(1, 2))  # 1-3 is no group
    rejected(state, action, IllegalAction, "neither a set nor a run")
    assert state.scout_show_tokens[1]
    assert len(state.active_set) == 2
    assert state.scout_chips == [0, 0, 0, 0]
    assert state.round_logs[0].actions == [(0, Show(0, 2))]
    action = ScoutAndShow(Scout(L, False, 0), Show(2, 1))  # a single does not beat the 8
    rejected(state, action, IllegalAction, "does not beat")


def test_scout_and_show_is_only_once_per_round_and_returns_next_round() -> None:
    state = started(3, {0: {0: [2], 2: [7, 8]}})
    state.apply(Show(0, 1))
    state.apply(ScoutAndShow(Scout(L, False, 0), Show(0, 1)))  # seat 1 owns the table
    state.apply(Show(0, 2))  # seat 2 beats it
    assert state.active_owner == 2
    state.apply(Scout(L, False, 0))  # seat 0
    assert state.current_seat == 1
    assert not state.can_scout_and_show()
    assert state.legal_scout_and_shows() == []
    assert not any(isinstance(a, ScoutAndShow) for a in state.legal_actions())
    rejected(
        state,
        ScoutAndShow(Scout(L, False, 0), Show(0, 1)),
        IllegalAction,
        "already used your Scout & Show this round",
    )
    state.apply(Scout(L, False, 0))  # seat 1: second scout of seat 2's show: round over
    assert state.round_results[0].end_reason is RoundEnd.UNBEATEN_SHOW
    assert state.round_index == 1
    assert state.observation(1).scout_show_tokens == (True, True, True)


def test_scout_and_show_does_not_exist_with_two_players() -> None:
    state = duel(2, [5], [6, 7])
    assert not state.can_scout_and_show()
    assert state.legal_scout_and_shows() == []
    assert not state.observation(1).scout_show_tokens[1]
    rejected(
        state,
        ScoutAndShow(Scout(L, False, 0), Show(1, 2)),
        IllegalAction,
        "not part of the 2-player game",
    )
