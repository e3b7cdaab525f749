"""What the whole table knows about the cards in each hand: the cards a seat has scouted.

A Scout is public: everybody sees which card was taken and where it went in (not which way up,
see `PublicAction`). So for every seat the table can keep a model of its hand, one slot per
card, holding the card's pair where it is known and None where it was dealt unseen. Shows take
their slices out of it. This is derived from the round's public history only, which is exactly
what the engine's per-seat `Observation` gives, so it can never hold a hidden card.
"""

from __future__ import annotations

from collections.abc import Sequence

from scout_rules import Observation, PublicAction

Pair = tuple[int, int]


class KnownCards:
    """Per seat, per hand position: the card's (low, high) pair if public, else None."""

    __slots__ = ("hands", "round_index", "seen", "shown")

    def __init__(self, num_players: int, hand_size: int, round_index: int = 0) -> None:
        self.round_index = round_index
        self.seen = 0
        self.hands: list[list[Pair | None]] = [[None] * hand_size for _ in range(num_players)]
        self.shown: set[Pair] = set()
        """Every card shown this round (each is now on the table, captured, or scouted)."""

    @classmethod
    def of(cls, observation: Observation, hand_size: int) -> KnownCards:
        """The table's knowledge at ``observation``, rebuilt from its round's history."""
        known = cls(observation.num_players, hand_size, observation.round_index)
        known.extend(observation.history)
        return known

    def extend(self, history: Sequence[PublicAction]) -> None:
        """Take in the history entries after the ones already seen."""
        for action in history[self.seen:]:
            self.apply(action)
        self.seen = max(self.seen, len(history))

    def apply(self, action: PublicAction) -> None:
        hand = self.hands[action.seat]
        if action.kind != "show":  # scout, or the scout part of a Scout & Show
            assert action.insert_at is not None
            hand.insert(action.insert_at, action.cards[0].pair)
        if action.kind != "scout":
            assert action.start is not None and action.length is not None
            del hand[action.start : action.start + action.length]
            played = action.cards if action.kind == "show" else action.cards[1:]
            self.shown.update(card.pair for card in played)

    def sync(self, observation: Observation, hand_size: int) -> None:
        """Catch up with ``observation``: the new entries of the same round, else start over."""
        self.follow(observation.round_index, observation.history, hand_size)

    def follow(self, round_index: int, history: Sequence[PublicAction], hand_size: int) -> None:
        """Catch up with a round's public history (`State.history`, `Observation.history`)."""
        if round_index != self.round_index or len(history) < self.seen:
            self.round_index, self.seen, self.shown = round_index, 0, set()
            self.hands = [[None] * hand_size for _ in self.hands]
        self.extend(history)

    def copy(self) -> KnownCards:
        other = KnownCards(0, 0, self.round_index)
        other.seen, other.shown = self.seen, set(self.shown)
        other.hands = [list(h) for h in self.hands]
        return other
