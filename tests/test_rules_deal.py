"""Every rule and decision of RULES.md, and every worked example of the detailed rule text
(seeds/002), pinned with hand-built deals (tests/support/rules_deals.py): the decks, the deal
and the shuffle."""

from __future__ import annotations

import pytest
from scout_rules import (
    Card,
    MalformedAction,
    SplitMix64,
    State,
    deal_match,
    deck_for,
    player_count_rules,
)
from scout_rules.cards import shuffled_deck
from support.rules_deals import build_deals


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
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
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


def test_the_shuffle_draws_exactly_what_the_generators_methods_draw() -> None:
    """`shuffled_deck` writes SplitMix64's draws out in its loops; docs/rules.md describes them
    as `below` and `next_u64` calls, and every deal must stay what that description gives."""

    def by_the_methods(num_players: int, rng: SplitMix64) -> list[Card]:
        cards = list(deck_for(num_players))
        for i in range(len(cards) - 1, 0, -1):
            j = rng.below(i + 1)
            cards[i], cards[j] = cards[j], cards[i]
        return [Card(high, low) if rng.next_u64() >> 63 else Card(low, high) for low, high in cards]

    for seed in (0, 1, 2**63, 2**64 - 1, *range(12345, 12345 + 300)):
        for num_players in range(2, 6):
            ours, theirs = SplitMix64(seed), SplitMix64(seed)
            assert shuffled_deck(num_players, ours) == by_the_methods(num_players, theirs)
            assert ours.next_u64() == theirs.next_u64()  # the generator is left where it was
