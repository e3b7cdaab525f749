"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): the 2-player game
(Scout chips, round ends, the second round)."""

from __future__ import annotations

from scout_rules import (
    IllegalAction,
    Phase,
    RoundEnd,
    Scout,
    Show,
    deck_for,
)
from support.rules_deals import L, duel, faces, rejected, start_round, started


def test_two_players_start_each_round_with_three_scout_chips() -> None:
    state = started(2, {})
    assert state.scout_chips == [3, 3]
    assert state.observation(0).scout_chips == (3, 3)


def test_two_player_scout_spends_own_chip_and_keeps_the_turn() -> None:
    state = duel(2, [4, 5], [])
    state.apply(Scout(L, False, 0))
    assert state.scout_chips == [3, 2]  # the owner receives nothing
    assert state.current_seat == 1
    state.apply(Scout(L, True, 0))
    assert state.scout_chips == [3, 1]
    assert state.current_seat == 1
    assert state.active_set == ()
    assert state.legal_scouts() == []  # the table is clear: seat 1 must Show
    state.apply(Show(0, 1))
    assert state.current_seat == 0  # a Show ends the turn


def test_two_player_cannot_scout_without_chips() -> None:
    state = duel(2, [1, 2, 3, 4, 5], [8, 8, 8])
    for pos in (11, 12, 13):
        state.apply(Scout(L, False, pos))
    assert [c.face for c in state.active_set] == [4, 5]
    assert state.scout_chips == [3, 0]
    assert state.current_seat == 1 and not state.round_results  # 8-8-8 still beats 4-5
    assert state.legal_scouts() == []
    assert Show(0, 3) in state.legal_actions()
    rejected(state, Scout(L, False, 0), IllegalAction, "spent all 3 Scout chips")
    assert state.observation(1).legal_scouts() == []


def test_two_player_round_ends_when_the_player_to_act_can_neither_beat_nor_scout() -> None:
    # Seat 1 spends its chips on seat 0's 1-2-3 (and shows it back as 3-2-1); seat 0 then
    # shows 8-8-8, which seat 1 can neither beat nor scout.
    state = started(2, {0: {0: [1, 2, 3, 8, 8, 8]}})
    state.apply(Show(0, 3))
    for _ in range(3):
        state.apply(Scout(L, False, 0))
    assert faces(state, 1)[:3] == [3, 2, 1]
    state.apply(Show(0, 3))
    assert state.current_seat == 0
    state.apply(Show(0, 3))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.NO_LEGAL_MOVE
    assert result.exempt_seat == 0  # the active set's owner
    assert result.captured == (3, 0)
    assert result.scout_chips == (3, 0)  # unspent chips score
    assert [len(h) for h in result.hands] == [5, 11]
    assert result.scores == (3 + 3, -11)
    assert state.round_index == 1 and state.phase is Phase.ROTATION


def test_two_player_round_ends_after_the_last_scout_if_no_show_beats() -> None:
    state = started(2, {0: {0: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}})
    state.apply(Show(0, 10))
    state.apply(Scout(L, False, 0))
    state.apply(Scout(L, False, 0))
    assert not state.round_results
    state.apply(Scout(L, False, 0))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.NO_LEGAL_MOVE
    assert result.exempt_seat == 0
    assert result.scores == (0 + 3 - 0, 0 + 0 - 14)


def test_two_player_round_ends_when_a_show_empties_a_hand() -> None:
    state = started(2, {0: {0: [5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 1: [6, 6]}})
    state.apply(Show(0, 1))
    state.apply(Show(0, 2))
    state.apply(Show(0, 10))
    result = state.round_results[0]
    assert result.end_reason is RoundEnd.HAND_EMPTIED
    assert result.exempt_seat is None
    assert result.scores == (2 + 3, 1 + 3 - 9)


def test_two_player_second_round_uses_the_other_22_cards_and_seat_1_starts() -> None:
    state = started(2, {0: {0: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}})
    round1 = {c.pair for s in range(2) for c in state.hand(s)}
    state.apply(Show(0, 10))
    for _ in range(3):
        state.apply(Scout(L, False, 0))
    assert state.round_index == 1
    start_round(state)
    assert state.current_seat == 1
    assert state.scout_chips == [3, 3]
    round2 = {c.pair for s in range(2) for c in state.hand(s)}
    assert len(round2) == 22 and not round1 & round2
    assert round1 | round2 == set(deck_for(2))
