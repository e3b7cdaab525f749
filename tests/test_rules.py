"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals so that every position is exactly controlled.

Deals are built by `build_deals`: the cards a test cares about are placed at the left of a hand
(an int means "a card with this face value", a `Card` is that exact card) and the rest of the
hand is filled with unused cards chosen so that no two neighbouring filler faces form a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from scout_rules import (
    Action,
    Card,
    End,
    Hand,
    IllegalAction,
    MalformedAction,
    OutOfTurn,
    Phase,
    RoundEnd,
    Scout,
    ScoutAndShow,
    ScoutError,
    Show,
    SplitMix64,
    State,
    deal_match,
    deck_for,
    group_key,
    player_count_rules,
    rank_scores,
)
from scout_rules.cards import shuffled_deck
from support.states import snapshot

L, R = End.LEFT, End.RIGHT

# ----- helpers ------------------------------------------------------------------------------

CardSpec = int | Card
DealSpec = Mapping[int, Mapping[int, Sequence[CardSpec]]]


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _match_faces(wanted: Sequence[int], free: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """A distinct free card for every wanted face value (bipartite matching, augmenting paths;
    higher other values are preferred)."""
    options = [[_pair(f, o) for o in range(10, 0, -1) if o != f and _pair(f, o) in free]
               for f in wanted]
    owner: dict[tuple[int, int], int] = {}

    def place(k: int, tried: set[tuple[int, int]]) -> bool:
        for p in options[k]:
            if p not in tried:
                tried.add(p)
                if p not in owner or place(owner[p], tried):
                    owner[p] = k
                    return True
        return False

    for k, face in enumerate(wanted):
        assert place(k, set()), f"no card left for face {face}"
    chosen = {k: p for p, k in owner.items()}
    return [chosen[k] for k in range(len(wanted))]


def build_deals(n: int, spec: DealSpec) -> list[list[list[Card]]]:
    """``spec[round][seat]`` is the left part of that dealt hand; the rest is group-free filler."""
    rules = player_count_rules(n)
    deck = set(deck_for(n))
    # With 2 players both rounds share one deck; otherwise each round has a fresh deck.
    groups = [list(range(rules.rounds))] if n == 2 else [[r] for r in range(rules.rounds)]
    deals: list[list[list[Card]]] = [[] for _ in range(rules.rounds)]
    for rounds in groups:
        used: set[tuple[int, int]] = set()
        for r in rounds:
            for cards in spec.get(r, {}).values():
                for c in cards:
                    if isinstance(c, Card):
                        assert c.pair in deck and c.pair not in used, f"bad test card {c}"
                        used.add(c.pair)
        # Give every wanted face its own card: a bipartite matching of faces to free pairs.
        wanted = {(r, seat, i): c for r in rounds for seat, cards in spec.get(r, {}).items()
                  for i, c in enumerate(cards) if not isinstance(c, Card)}
        chosen = dict(zip(wanted, _match_faces(list(wanted.values()), deck - used), strict=True))
        used |= set(chosen.values())
        prefixes: dict[tuple[int, int], list[Card]] = {}
        for r in rounds:
            for seat, cards in spec.get(r, {}).items():
                out = []
                for i, c in enumerate(cards):
                    if isinstance(c, Card):
                        out.append(c)
                        continue
                    a, b = chosen[(r, seat, i)]
                    out.append(Card(c, b if a == c else a))
                prefixes[(r, seat)] = out
        pool = sorted(deck - used)
        for r in rounds:
            for seat in range(n):
                hand = list(prefixes.get((r, seat), []))
                assert len(hand) <= rules.hand_size
                while len(hand) < rules.hand_size:
                    prev = hand[-1].face if hand else None
                    choice = None
                    for p in pool:
                        for card in (Card(p[1], p[0]), Card(p[0], p[1])):
                            if prev is None or abs(card.face - prev) >= 2:
                                choice = (p, card)
                                break
                        if choice:
                            break
                    if choice is None:  # pragma: no cover - only when the pool is nearly empty
                        choice = (pool[0], Card(*pool[0]))
                    pool.remove(choice[0])
                    hand.append(choice[1])
                deals[r].append(hand)
    return deals


def started(n: int, spec: DealSpec, rotate: Iterable[int] = ()) -> State:
    """A state in round 1's play phase (seat 0 to act), seats in ``rotate`` having rotated."""
    state = State.from_deals(n, build_deals(n, spec))
    rot = set(rotate)
    for seat in range(n):
        state.choose_rotation(seat, seat in rot)
    assert state.phase is Phase.PLAY and state.current_seat == 0
    return state


def start_round(state: State, rotate: Iterable[int] = ()) -> None:
    rot = set(rotate)
    for seat in state.pending_rotations():
        state.choose_rotation(seat, seat in rot)


def duel(n: int, table: Sequence[CardSpec], hand: Sequence[CardSpec]) -> State:
    """Seat 0 shows ``table`` (its leftmost cards); seat 1, holding ``hand`` on its left, acts."""
    state = started(n, {0: {0: table, 1: hand}})
    state.apply(Show(0, len(table)))
    assert state.current_seat == 1
    return state


def faces(state: State, seat: int) -> list[int]:
    return [c.face for c in state.hand(seat)]


def rejected(state: State, action: Any, kind: type[ScoutError], match: str | None = None) -> None:
    """``action`` is refused with ``kind`` by check and apply, and the state is left unchanged."""
    before = snapshot(state)
    assert not state.is_legal(action)
    with pytest.raises(kind, match=match):
        state.check(action)
    with pytest.raises(kind, match=match):
        state.apply(action)
    assert snapshot(state) == before


# ----- cards and deal -----------------------------------------------------------------------


def test_five_player_deck_is_all_45_pairs() -> None:
    deck = deck_for(5)
    assert len(deck) == 45 == len(set(deck))
    assert set(deck) == {(a, b) for a in range(1, 11) for b in range(a + 1, 11)}


@pytest.mark.parametrize("n", [2, 4])
def test_two_and_four_player_decks_remove_only_the_9_10_card(n: int) -> None:
    deck = set(deck_for(n))
    assert len(deck_for(n)) == 44 == len(deck)
    assert set(deck_for(5)) - deck == {(9, 10)}


def test_three_player_deck_removes_the_nine_cards_containing_10() -> None:
    deck = set(deck_for(3))
    assert len(deck_for(3)) == 36 == len(deck)
    assert set(deck_for(5)) - deck == {(a, 10) for a in range(1, 10)}
    assert all(10 not in p for p in deck)


@pytest.mark.parametrize(
    ("n", "deck_size", "hand_size", "rounds"),
    [(2, 44, 11, 2), (3, 36, 12, 3), (4, 44, 11, 4), (5, 45, 9, 5)],
)
def test_hand_sizes_and_round_counts_per_player_count(
    n: int, deck_size: int, hand_size: int, rounds: int
) -> None:
    rules = player_count_rules(n)
    assert (rules.deck_size, rules.hand_size, rules.rounds) == (deck_size, hand_size, rounds)
    deals = deal_match(n, 7)
    assert len(deals) == rounds
    for round_hands in deals:
        assert [len(h) for h in round_hands] == [hand_size] * n
    state = State.new(n, 7)
    assert state.num_rounds == rounds
    assert [len(state.hand(s)) for s in range(n)] == [hand_size] * n


@pytest.mark.parametrize("n", [0, 1, 6])
def test_only_two_to_five_players(n: int) -> None:
    with pytest.raises(ValueError, match="2 to 5"):
        player_count_rules(n)
    with pytest.raises(ValueError):
        State.new(n, 1)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_every_multiplayer_round_deals_the_whole_deck(n: int) -> None:
    for round_hands in deal_match(n, 99):
        pairs = [c.pair for h in round_hands for c in h]
        assert sorted(pairs) == sorted(deck_for(n))


@pytest.mark.parametrize("n", [3, 4, 5])
def test_multiplayer_deal_is_a_fresh_shuffle_dealt_in_order_from_the_starting_seat(n: int) -> None:
    seed = 2024
    rng = SplitMix64(seed)
    deals = deal_match(n, seed)
    for r in range(n):
        deck = shuffled_deck(n, rng)
        start = r % n
        for seat in range(n):
            expected = [deck[i] for i in range(len(deck)) if (start + i) % n == seat]
            assert list(deals[r][seat]) == expected


def test_two_player_deal_splits_one_shuffle_into_positions_0_21_and_22_43() -> None:
    for seed in (0, 1, 12345, 2**64 - 1):
        deck = shuffled_deck(2, SplitMix64(seed))
        assert len(deck) == 44
        deals = deal_match(2, seed)
        # Round 1: positions 0-21, alternately from seat 0 (round 1's starting seat).
        assert list(deals[0][0]) == deck[0:22:2]
        assert list(deals[0][1]) == deck[1:22:2]
        # Round 2: positions 22-43, alternately from seat 1 (round 2's starting seat).
        assert list(deals[1][1]) == deck[22:44:2]
        assert list(deals[1][0]) == deck[23:44:2]
        r1 = {c.pair for h in deals[0] for c in h}
        r2 = {c.pair for h in deals[1] for c in h}
        assert len(r1) == len(r2) == 22
        assert not r1 & r2
        assert r1 | r2 == set(deck_for(2))


def test_splitmix64_matches_the_reference_sequence() -> None:
    rng = SplitMix64(0)
    assert [rng.next_u64() for _ in range(3)] == [
        0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
    ]


def test_shuffle_randomises_order_and_orientation() -> None:
    orientations: set[bool] = set()
    orders = set()
    for seed in range(20):
        deck = shuffled_deck(5, SplitMix64(seed))
        assert sorted(c.pair for c in deck) == sorted(deck_for(5))
        orders.add(tuple(c.pair for c in deck))
        orientations.update(c.face > c.other for c in deck)
        # About half the cards show their higher value: both orientations occur in every deck.
        assert 5 < sum(c.face > c.other for c in deck) < 40
    assert orientations == {True, False}
    assert len(orders) == 20
    assert tuple(deck_for(5)) not in orders  # never the sorted order


def test_dealt_hands_are_not_sorted() -> None:
    state = State.new(5, 3)
    hands = [list(state.hand(s)) for s in range(5)]
    assert hands == [list(h) for h in deal_match(5, 3)[0]]
    assert any(h != sorted(h) for h in hands)


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_seed_must_be_an_unsigned_64_bit_integer(seed: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        deal_match(4, seed)


def test_explicit_deals_are_validated() -> None:
    good = build_deals(3, {})
    State.from_deals(3, good)
    short = [list(r) for r in good]
    short[0] = [list(h) for h in good[0]]
    short[0][1] = short[0][1][:-1]
    with pytest.raises(MalformedAction, match="dealt 11 cards, not 12"):
        State.from_deals(3, short)
    twice = [[list(h) for h in r] for r in good]
    twice[1][0][0] = twice[1][2][0]
    with pytest.raises(MalformedAction, match="dealt twice"):
        State.from_deals(3, twice)
    with pytest.raises(MalformedAction, match="rounds of deals"):
        State.from_deals(3, good[:2])
    two = build_deals(2, {})
    overlap = [[list(h) for h in r] for r in two]
    overlap[1][0][0] = overlap[0][0][0]
    with pytest.raises(MalformedAction, match="22 cards round 1 did not use"):
        State.from_deals(2, overlap)
    four = [[list(h) for h in r] for r in build_deals(4, {})]
    four[0][0][0] = Card(10, 9)
    with pytest.raises(MalformedAction, match="not in the 4-player deck"):
        State.from_deals(4, four)


# ----- hand rotation ------------------------------------------------------------------------


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


# ----- turns --------------------------------------------------------------------------------


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


# ----- shows: groups and comparison ---------------------------------------------------------


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
    rejected(state, Show(0, 3), IllegalAction, "a 3-card run 8-9-10 does not beat the active "
             "3-card set 2-2-2")


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
    rejected(state, Show(0, 2), IllegalAction,
             "a 2-card set 5-5 does not beat the active 2-card set 5-5")


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


# ----- scouting -----------------------------------------------------------------------------


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
        assert after[: scout.insert_at] + after[scout.insert_at + 1:] == before
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


# ----- Scout & Show -------------------------------------------------------------------------


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
    rejected(state, ScoutAndShow(Scout(L, False, 12), Show(13, 1)), MalformedAction,
             "outside your hand of 13 cards")
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
    rejected(state, ScoutAndShow(Scout(L, False, 0), Show(0, 1)), IllegalAction,
             "already used your Scout & Show this round")
    state.apply(Scout(L, False, 0))  # seat 1: second scout of seat 2's show: round over
    assert state.round_results[0].end_reason is RoundEnd.UNBEATEN_SHOW
    assert state.round_index == 1
    assert state.observation(1).scout_show_tokens == (True, True, True)


def test_scout_and_show_does_not_exist_with_two_players() -> None:
    state = duel(2, [5], [6, 7])
    assert not state.can_scout_and_show()
    assert state.legal_scout_and_shows() == []
    assert not state.observation(1).scout_show_tokens[1]
    rejected(state, ScoutAndShow(Scout(L, False, 0), Show(1, 2)), IllegalAction,
             "not part of the 2-player game")


# ----- round end and scoring with 3-5 players -----------------------------------------------


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
        state = started(3, {0: {0: [1, 2, 3], 1: [2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5],
                                2: [3, 4, 5, 4, 5, 6, 7, 8]}})
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
    state = started(3, {0: {0: [9, 3, 4, 5, 3, 4, 5, 6], 1: [1, 2, 3, 1, 2, 3, 4],
                            2: [2, 3, 4, 2, 3, 4, 5]}})
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


# ----- 2 players ----------------------------------------------------------------------------


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


# ----- match result -------------------------------------------------------------------------


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


# ----- error kinds and messages -------------------------------------------------------------


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
    rejected(state, Show(0, 2), IllegalAction, "cards 2,9 at positions 0-1 are neither a set "
             "nor a run")
    rejected(state, Scout(L, False, 0), IllegalAction, "no active set to scout from")
    state.apply(Show(1, 1))
    assert state.current_seat == 1
    rejected(state, Show(0, 1), IllegalAction, "a single 1 does not beat the active single 9")
    for kind in (IllegalAction, MalformedAction, OutOfTurn):
        assert issubclass(kind, ScoutError)


def test_show_that_does_not_beat_names_both_groups() -> None:
    state = duel(4, [7, 8], [3, 4])
    rejected(state, Show(0, 2), IllegalAction,
             "a 2-card run 3-4 does not beat the active 2-card run 7-8")
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
        Show(0, 1), Show(0, 2), Show(1, 2), Show(0, 40), Scout(L, False, 13),
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


def test_the_shuffle_draws_exactly_what_the_generators_methods_draw() -> None:
    """`shuffled_deck` writes SplitMix64's draws out in its loops; docs/rules.md describes them
    as `below` and `next_u64` calls, and every deal must stay what that description gives."""

    def by_the_methods(num_players: int, rng: SplitMix64) -> list[Card]:
        cards = list(deck_for(num_players))
        for i in range(len(cards) - 1, 0, -1):
            j = rng.below(i + 1)
            cards[i], cards[j] = cards[j], cards[i]
        return [Card(high, low) if rng.next_u64() >> 63 else Card(low, high)
                for low, high in cards]

    for seed in (0, 1, 2**63, 2**64 - 1, *range(12345, 12345 + 300)):
        for num_players in range(2, 6):
            ours, theirs = SplitMix64(seed), SplitMix64(seed)
            assert shuffled_deck(num_players, ours) == by_the_methods(num_players, theirs)
            assert ours.next_u64() == theirs.next_u64()  # the generator is left where it was
