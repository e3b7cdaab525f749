"""Cards, hands, decks and the seeded deal.

A SCOUT card carries two different numbers. In a hand each card has an orientation: the *face*
value is the one in play, the *other* value is the one a rotation (or a turned Scout) would put in
play. The deck identity of a card is the unordered pair, which `Card.pair` gives.

The deal is derived from a 64-bit seed with SplitMix64 and Fisher-Yates, documented step by step
in ``docs/rules.md`` so that any language can reproduce it bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import NamedTuple

from ._native import SPEEDUPS

MASK64 = (1 << 64) - 1


class Card(NamedTuple):
    """One card as held: ``face`` is in play, ``other`` is on the turned-away end."""

    face: int
    other: int

    @property
    def pair(self) -> tuple[int, int]:
        """The card's deck identity, independent of orientation: (low, high)."""
        return (self.face, self.other) if self.face < self.other else (self.other, self.face)

    def flipped(self) -> Card:
        """The same card turned round, as after a rotation or a turned Scout: the other value
        comes into play."""
        return Card(self.other, self.face)

    def __str__(self) -> str:
        return f"{self.face}/{self.other}"


face_of = itemgetter(0)
"""A card's face, as a function: ``map(face_of, cards)`` reads faces without a Python loop."""


def _pure_faces_of(cards: Sequence[Card]) -> tuple[int, ...]:
    return tuple(map(face_of, cards))


faces_of: Callable[[Sequence[Card]], tuple[int, ...]] = (
    _pure_faces_of if SPEEDUPS is None else SPEEDUPS.faces_of)
"""The faces of some cards, in order (what `Hand.faces` gives)."""


CARDS: tuple[tuple[Card, ...], ...] = tuple(tuple(Card(f, o) for o in range(11))
                                            for f in range(11))
"""``CARDS[face][other]``: every card of the deck either way up, made once and shared (cards
are immutable), so dealing and turning cards build none."""


def card_of(face: int, other: int) -> Card:
    """The card ``face``/``other`` (the shared one when both are 0-10)."""
    if 0 <= face <= 10 and 0 <= other <= 10:
        return CARDS[face][other]
    return Card(face, other)


class Hand(tuple[Card, ...]):
    """A hand in its fixed order, leftmost card first. Immutable; positions are 0-based."""

    __slots__ = ()

    @property
    def faces(self) -> tuple[int, ...]:
        return faces_of(self)

    def rotated(self) -> Hand:
        """The whole hand turned 180 degrees: order reversed and every card turned."""
        return Hand(Card(c.other, c.face) for c in reversed(self))

    def __str__(self) -> str:
        return " ".join(str(card.face) for card in self)


class PlayerCountRules(NamedTuple):
    """What the player count fixes: deck, hand size, rounds."""

    num_players: int
    deck_size: int
    hand_size: int
    rounds: int


RULES_BY_PLAYERS: dict[int, PlayerCountRules] = {
    2: PlayerCountRules(2, 44, 11, 2),
    3: PlayerCountRules(3, 36, 12, 3),
    4: PlayerCountRules(4, 44, 11, 4),
    5: PlayerCountRules(5, 45, 9, 5),
}


def player_count_rules(num_players: int) -> PlayerCountRules:
    try:
        return RULES_BY_PLAYERS[num_players]
    except KeyError:
        raise ValueError(f"SCOUT is played by 2 to 5 players, not {num_players}") from None


def deck_for(num_players: int) -> tuple[tuple[int, int], ...]:
    """The cards used, as (low, high) pairs in canonical (lexicographic) order."""
    try:
        return _DECKS[num_players]
    except KeyError:
        player_count_rules(num_players)
        raise


def _deck(num_players: int) -> tuple[tuple[int, int], ...]:
    pairs = [(a, b) for a in range(1, 11) for b in range(a + 1, 11)]
    if num_players in (2, 4):
        pairs.remove((9, 10))
    elif num_players == 3:
        pairs = [p for p in pairs if p[1] != 10]
    return tuple(pairs)


_DECKS = {n: _deck(n) for n in RULES_BY_PLAYERS}


class SplitMix64:
    """The SplitMix64 generator (Steele, Lea, Flood 2014): tiny, stable, in every language."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & MASK64

    def getstate(self) -> int:
        """The generator's whole state, for `setstate` (as `random.Random` has them)."""
        return self._state

    def setstate(self, state: int) -> None:
        """Continue from a state `getstate` returned."""
        self._state = state & MASK64

    def next_u64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & MASK64
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """Uniform integer in [0, bound) by rejection, so no value is favoured."""
        limit = (1 << 64) - ((1 << 64) % bound)
        while True:
            x = self.next_u64()
            if x < limit:
                return x % bound


_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_REJECTION_LIMITS = [0, *((1 << 64) - ((1 << 64) % bound) for bound in range(1, 64))]
"""`SplitMix64.below`'s rejection limit for each bound a deck's shuffle draws with."""


def _pure_shuffled_deck(num_players: int, rng: SplitMix64) -> list[Card]:
    return _pure_shuffled_cards(deck_for(num_players), rng)


def _pure_shuffled_cards(pairs: Sequence[tuple[int, int]], rng: SplitMix64) -> list[Card]:
    """Shuffle order (Fisher-Yates from the top index down) then orientation (one draw per card).

    The draws are `SplitMix64.below` and `SplitMix64.next_u64` written out in the loops: a
    referee deals every match it starts, and the calls were most of a deal's cost. A test pins
    the deals to the generator's methods."""
    cards = list(pairs)
    state = rng.getstate()
    limits = _REJECTION_LIMITS
    for i in range(len(cards) - 1, 0, -1):
        bound = i + 1
        limit = limits[bound]
        while True:
            state = (state + _GAMMA) & MASK64
            z = ((state ^ (state >> 30)) * _MIX1) & MASK64
            z = ((z ^ (z >> 27)) * _MIX2) & MASK64
            x = z ^ (z >> 31)
            if x < limit:
                break
        j = x % bound
        cards[i], cards[j] = cards[j], cards[i]
    oriented = []
    for low, high in cards:
        state = (state + _GAMMA) & MASK64
        z = ((state ^ (state >> 30)) * _MIX1) & MASK64
        z = ((z ^ (z >> 27)) * _MIX2) & MASK64
        oriented.append(CARDS[high][low] if (z ^ (z >> 31)) >> 63 else CARDS[low][high])
    rng.setstate(state)
    return oriented


def shuffled_deck(num_players: int, rng: SplitMix64) -> list[Card]:
    """`_pure_shuffled_deck`'s draws, in C when the extension is built (a test holds the two
    equal)."""
    return shuffled_cards(deck_for(num_players), rng)


def shuffled_cards(pairs: Sequence[tuple[int, int]], rng: SplitMix64) -> list[Card]:
    """Any cards (as (low, high) pairs) shuffled and turned as a deck is: a deal's draws, also
    what a determinization draws the unseen cards with."""
    if SPEEDUPS is None:
        return _pure_shuffled_cards(pairs, rng)
    drawn: tuple[list[Card], int] = SPEEDUPS.shuffled_cards(rng.getstate(), pairs, CARDS)
    rng.setstate(drawn[1])
    return drawn[0]


def deal_round_hands(deck: Sequence[Card], num_players: int, starting_seat: int) -> list[Hand]:
    """Deal cards in order, one at a time, starting with the round's starting seat."""
    hands: list[list[Card]] = [[] for _ in range(num_players)]
    for i, card in enumerate(deck):
        hands[(starting_seat + i) % num_players].append(card)
    return [Hand(h) for h in hands]


def deal_match(num_players: int, seed: int) -> list[list[Hand]]:
    """Every round's dealt hands (before rotation) for a seed: ``deals[round][seat]``.

    3-5 players: each round shuffles the full deck afresh from the one generator. 2 players: one
    shuffle; round 1 deals deck positions 0-21, round 2 positions 22-43.
    """
    if not 0 <= seed <= MASK64:
        raise ValueError(f"a seed is an unsigned 64-bit integer, not {seed}")
    rules = player_count_rules(num_players)
    rng = SplitMix64(seed)
    deals: list[list[Hand]] = []
    if num_players == 2:
        deck = shuffled_deck(2, rng)
        for r in range(rules.rounds):
            part = deck[r * 22 : (r + 1) * 22]
            deals.append(deal_round_hands(part, 2, r % 2))
    else:
        for r in range(rules.rounds):
            deck = shuffled_deck(num_players, rng)
            deals.append(deal_round_hands(deck, num_players, r % num_players))
    return deals
