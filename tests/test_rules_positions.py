"""The public constructors of a position: `State.from_position` / `State.position` round-trip
every state play reaches, an `InformationSet` fills the unseen cards into a legal state
consistent with what its seat saw, and anything play cannot reach is refused by cause."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scout_rules import (
    BadShape,
    Card,
    CardsDontAddUp,
    InconsistentTable,
    InformationSet,
    InvalidPosition,
    OutOfTurn,
    Phase,
    Position,
    State,
    deck_for,
)
from scout_rules.state import _MATCH_SLOTS, _ROUND_SLOTS


def played(num_players: int, seed: int, steps: int, policy_seed: int) -> State:
    """A state ``steps`` decisions (rotations included) into a seeded match of random play."""
    rng = random.Random(policy_seed)
    state = State.new(num_players, seed)
    for _ in range(steps):
        if state.is_over:
            break
        if state.phase is Phase.ROTATION:
            state.choose_rotation(rng.choice(state.pending_rotations()), rng.random() < 0.5)
        else:
            state.apply(rng.choice(state.legal_actions()))
    return state


def play_out(state: State, rng: random.Random) -> list[object]:
    """Random play to the match's end, returning what happened at each step."""
    trace: list[object] = []
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            seat = state.pending_rotations()[0]
            rotate = rng.random() < 0.5
            state.choose_rotation(seat, rotate)
            trace.append((seat, rotate))
        else:
            action = rng.choice(state.legal_actions())
            state.apply(action)
            trace.append((action, state.last_action, tuple(state.scores)))
    trace.append([(r.end_reason, r.exempt_seat, r.scores) for r in state.round_results])
    return trace


def every_slot_is_set(state: State) -> None:
    for name in (*_MATCH_SLOTS, *_ROUND_SLOTS):
        getattr(state, name)  # AttributeError for a slot a constructor forgot


positions = st.tuples(st.integers(2, 5), st.integers(0, 2**64 - 1), st.integers(0, 400),
                      st.integers(0, 99))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(positions, st.integers(0, 99))
def test_a_state_reached_by_play_round_trips_through_its_position_and_plays_on_the_same(
        where: tuple[int, int, int, int], play_seed: int) -> None:
    state = played(*where)
    if state.is_over:
        with pytest.raises(OutOfTurn):
            state.position()
        return
    position = state.position()
    again = State.from_position(position)
    every_slot_is_set(again)
    assert again.position() == position
    assert again.num_rounds == state.num_rounds
    for seat in range(state.num_players):
        assert again.observation(seat) == state.observation(seat)
    if state.phase is Phase.PLAY:
        assert again.legal_actions() == state.legal_actions()
    # the same play from both, action by action, with the same public records and scores
    assert play_out(again, random.Random(play_seed))[:-1] == \
        play_out(state, random.Random(play_seed))[:-1]
    assert again.scores == state.scores


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(positions, st.integers(0, 4), st.integers(0, 99))
@example((2, 0, 18, 0), 1, 0)  # 2 players, the other seat to act with no Scout chip: it must Show
def test_determinize_always_gives_a_legal_state_consistent_with_the_seat_s_view(
        where: tuple[int, int, int, int], seat_pick: int, fill_seed: int) -> None:
    state = played(*where)
    if state.phase is not Phase.PLAY:
        return
    seat = seat_pick % state.num_players
    view = state.observation(seat)
    info = InformationSet.from_observation(view)
    rng = random.Random(fill_seed)
    for _ in range(3):
        filled = info.determinize(rng)
        every_slot_is_set(filled)
        position = filled.position()
        State.from_position(position)  # the full check passes: reachable, every card once
        assert position.hands[seat] == state.position().hands[seat]
        seen = filled.observation(seat)
        for name in ("hand", "hand_sizes", "active_set", "active_owner", "captured_counts",
                     "scout_chips", "scout_show_tokens", "scores", "current_seat", "history",
                     "round_index", "phase"):
            assert getattr(seen, name) == getattr(view, name), name
        for s, slots in enumerate(info.known):
            for i, card in enumerate(slots):
                if card is not None:
                    assert filled.hand(s)[i].pair == card.pair == state.hand(s)[i].pair
        if seat == state.current_seat:
            assert filled.legal_actions() == state.legal_actions()
        round_index = filled.round_index
        play_out(filled, rng)  # plays legally to the end of the round, where its match ends
        assert filled.is_over and filled.round_index == round_index


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(positions)
def test_a_fill_that_breaks_the_public_record_is_refused(where: tuple[int, int, int, int]
                                                        ) -> None:
    state = played(*where)
    if state.phase is not Phase.PLAY:
        return
    seat = state.current_seat
    assert seat is not None
    info = InformationSet.from_observation(state.observation(seat))
    hands = [list(h) for h in info.deal(random.Random(0))]
    other = (seat + 1) % state.num_players
    hands[other][0] = hands[seat][0]  # a card of this seat's own hand, given twice
    with pytest.raises(CardsDontAddUp):
        info.state(hands)
    hands = [list(h) for h in info.deal(random.Random(0))]
    hands[seat] = hands[seat][::-1]
    if hands[seat] != list(info.hand):
        with pytest.raises(CardsDontAddUp):
            info.state(hands)


def start_of_play(num_players: int = 3, seed: int = 5) -> State:
    state = State.new(num_players, seed)
    for seat in range(num_players):
        state.choose_rotation(seat, False)
    return state


def test_clone_and_every_constructor_set_every_slot() -> None:
    state = start_of_play()
    state.apply(state.legal_actions()[0])
    for made in (State.new(4, 1), State.from_deals(2, [[list(h) for h in r] for r in
                                                          State.new(2, 3).deals]),
                 state.clone(), State.from_position(state.position()),
                 InformationSet.from_observation(state.observation(0)).determinize(
                     random.Random(1))):
        every_slot_is_set(made)


@pytest.mark.parametrize(("change", "error"), [
    (lambda p: {"num_players": 6}, BadShape),
    (lambda p: {"round_index": 3}, BadShape),
    (lambda p: {"scores": p.scores[:-1]}, BadShape),
    (lambda p: {"scout_chips": (0, -1, 0)}, BadShape),
    (lambda p: {"scouts_since_show": 2}, BadShape),
    (lambda p: {"current_seat": 3}, BadShape),
    (lambda p: {"hands": (p.hands[0] + (p.hands[1][0],), *p.hands[1:])}, CardsDontAddUp),
    (lambda p: {"hands": (p.hands[0][1:], *p.hands[1:])}, CardsDontAddUp),
    (lambda p: {"hands": ((Card(1, 1), *p.hands[0][1:]), *p.hands[1:])}, CardsDontAddUp),
    (lambda p: {"active_owner": 1}, InconsistentTable),
    (lambda p: {"phase": Phase.ROTATION}, InconsistentTable),
    (lambda p: {"phase": Phase.MATCH_OVER}, BadShape),
])
def test_an_unreachable_position_is_refused_by_cause(
        change: Callable[[Position], dict[str, Any]], error: type[InvalidPosition]) -> None:
    position = start_of_play().position()
    State.from_position(position)
    bad = dataclasses.replace(position, **change(position))
    with pytest.raises(error) as raised:
        State.from_position(bad)
    assert isinstance(raised.value, InvalidPosition) and isinstance(raised.value, ValueError)
    assert str(raised.value)


def test_an_active_set_that_is_no_group_or_the_wrong_seat_to_act_is_refused() -> None:
    state = start_of_play()
    while not any(a.length >= 2 for a in state.legal_shows()):
        state.apply(state.legal_actions()[0])
    show = max(state.legal_shows(), key=lambda s: s.length)
    state.apply(show)
    position = state.position()
    State.from_position(position)
    active = position.active_set
    assert len(active) >= 2
    seat, i, card = next((s, i, c) for s, h in enumerate(position.hands)
                         for i, c in enumerate(h) if abs(c.face - active[0].face) > 1)
    hands = list(position.hands)
    hands[seat] = (*hands[seat][:i], active[1], *hands[seat][i + 1:])
    broken = (active[0], card, *active[2:])
    with pytest.raises(InconsistentTable):  # every card still once, but no set nor run
        State.from_position(dataclasses.replace(position, active_set=broken,
                                                hands=tuple(hands)))
    wrong_seat = (position.current_seat or 0) + 1
    with pytest.raises(InconsistentTable):
        State.from_position(dataclasses.replace(position, current_seat=wrong_seat % 3))


def test_a_position_of_a_two_player_round_one_carries_round_two_and_the_match_plays_on() -> None:
    state = start_of_play(2, 11)
    position = state.position()
    assert len(position.later_deals) == 1
    again = State.from_position(position)
    assert play_out(again, random.Random(4)) == play_out(state, random.Random(4))
    ends_here = State.from_position(dataclasses.replace(position, later_deals=()))
    play_out(ends_here, random.Random(4))
    assert ends_here.is_over and len(ends_here.round_results) == 1
    bad = dataclasses.replace(position, later_deals=(position.hands,))
    with pytest.raises(CardsDontAddUp):
        State.from_position(bad)


def test_the_unseen_pool_is_the_deck_less_what_the_seat_can_place() -> None:
    state = start_of_play(4, 9)
    info = InformationSet.from_observation(state.observation(2))
    mine = {c.pair for c in state.hand(2)}
    assert set(info.unseen) == set(deck_for(4)) - mine
    with pytest.raises(CardsDontAddUp):  # 33 unknown cards, 32 left to fill them
        InformationSet.from_observation(state.observation(2),
                                        excluded=[next(iter(info.unseen))])


def test_a_fill_draws_the_unseen_cards_evenly_and_turns_every_card_either_way() -> None:
    """`deal` is uniform: each unseen card is as likely in an unknown place as any other, and
    each card, public or not, comes either way up half the time."""
    rng = random.Random(4)
    for seed in range(200):  # a position where another seat holds a scouted (public) card
        state = State.new(4, seed)
        for seat in range(4):
            state.choose_rotation(seat, False)
        for _ in range(12):
            if state.phase is not Phase.PLAY:
                break
            state.apply(rng.choice(state.legal_actions()))
        if state.phase is not Phase.PLAY or state.round_index:
            continue
        info = InformationSet.from_observation(state.observation(0))
        public = [(s, i) for s, slots in enumerate(info.known) if s
                  for i, c in enumerate(slots) if c is not None]
        if public:
            break
    else:
        raise AssertionError("no position with a public card in another hand")
    seat, place = next((s, i) for s, slots in enumerate(info.known) if s
                       for i, c in enumerate(slots) if c is None)
    draws = 6000
    fill_rng = random.Random(11)
    seen: dict[tuple[int, int], int] = {}
    up = turned = 0
    for _ in range(draws):
        hands = info.deal(fill_rng)
        card = hands[seat][place]
        seen[card.pair] = seen.get(card.pair, 0) + 1
        up += card.face == card.pair[0]
        s, i = public[0]
        turned += hands[s][i] != info.known[s][i]
    assert set(seen) == set(info.unseen)
    expected = draws / len(info.unseen)
    assert all(0.7 * expected < n < 1.3 * expected for n in seen.values()), seen
    assert 0.45 < up / draws < 0.55 and 0.45 < turned / draws < 0.55


def test_a_deal_scored_by_a_bot_keeps_the_first_fill_it_scores_zero_else_the_lowest() -> None:
    """`deal`'s ``misfits`` hook: the rules draw, the bot's score chooses; with one try, or no
    score, the fill is the plain one from the same generator."""
    info = InformationSet.from_observation(start_of_play(3, 5).observation(1))
    assert info.deal(random.Random(8), tries=1, misfits=lambda hands: 1) == \
        info.deal(random.Random(8))
    scored: list[tuple[int, tuple[tuple[Card, ...], ...]]] = []

    def by_left_card(hands: tuple[tuple[Card, ...], ...]) -> int:  # 0: seat 0's first is a 10
        score = 10 - hands[0][0].face
        scored.append((score, hands))
        return score

    for seed in range(30):
        scored.clear()
        kept = info.deal(random.Random(seed), tries=6, misfits=by_left_card)
        assert 1 <= len(scored) <= 6
        zeros = [hands for score, hands in scored if score == 0]
        if zeros:  # drawing stops at the first fill scored 0
            assert kept is zeros[0] and scored[-1][1] is kept
        else:
            assert len(scored) == 6
            assert kept is min(scored, key=lambda pair: pair[0])[1]
