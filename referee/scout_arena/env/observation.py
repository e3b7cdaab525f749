"""A seat's view of the table as one flat float32 vector with a documented layout.

Built from the engine's per-seat `Observation` (and the table's `KnownCards`, derived from that
observation's public history) and nothing else, so a vector can never carry a card another seat
holds unseen. Seats are *relative*: index 0 is the observing seat, 1 the next seat to its left
in turn order, and so on; a network then learns one seat's policy for every seat.

Segments, in order (``ObservationLayout.segments`` names them; ``n`` seats, ``R`` rounds,
``H`` the codec's ``max_hand``, ``D`` deck size, a *card row* is 21 numbers, see below)::

    phase           3        one-hot: rotation, play, match over
    rotation_due    1        1 while this seat has still to choose its rotation
    round           R        one-hot round index
    starting_seat   n        one-hot, relative
    current_seat    n        one-hot, relative (all zero outside play)
    hand            H x 21   own hand, leftmost first: [1, face one-hot 1-10, other one-hot 1-10]
    active_set      10 x 21  the active set, leftmost first, same rows
    active_owner    n        one-hot, relative (all zero with no active set)
    seats           n x 5    per relative seat: hand size, captured cards, Scout chips,
                             Scout & Show token (0/1), match score of the finished rounds
    known_hands     (n-1)xHx21  per other seat (relative 1..n-1), per hand position:
                             [1 if the position holds a card, low one-hot, high one-hot of the
                             card's pair if it was scouted there this round, else zeros]
    captured        D        1 for each card of the deck (canonical order) captured this round

An empty row is all zeros. Counts are raw (not normalised); their bounds are in
`ObservationLayout.low` / ``high``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scout_rules import Card, Observation, Phase, State, deck_for, player_count_rules

from .actions import MAX_GROUP, max_hand, round_cards
from .known import KnownCards

CARD_ROW = 21
SEAT_FIELDS = ("hand_size", "captured", "scout_chips", "scout_show_token", "score")
Vector = npt.NDArray[np.float32]


class Segment(NamedTuple):
    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class ObservationLayout:
    """Offsets and bounds of every segment for one player count, and the encoder itself."""

    def __init__(self, num_players: int) -> None:
        n = self.num_players = num_players
        rules = player_count_rules(n)
        self.hand_size = rules.hand_size
        self.max_hand = h = max_hand(n)
        self.deck = deck_for(n)
        self._deck_index = {pair: i for i, pair in enumerate(self.deck)}
        shapes: list[tuple[str, tuple[int, ...]]] = [
            ("phase", (3,)), ("rotation_due", (1,)), ("round", (rules.rounds,)),
            ("starting_seat", (n,)), ("current_seat", (n,)), ("hand", (h, CARD_ROW)),
            ("active_set", (MAX_GROUP, CARD_ROW)), ("active_owner", (n,)),
            ("seats", (n, len(SEAT_FIELDS))), ("known_hands", (n - 1, h, CARD_ROW)),
            ("captured", (len(self.deck),)),
        ]
        self.segments: dict[str, Segment] = {}
        offset = 0
        for name, shape in shapes:
            segment = Segment(name, offset, shape)
            self.segments[name] = segment
            offset += segment.size
        self.size = offset
        self._offsets = {name: seg.offset for name, seg in self.segments.items()}
        self.low, self.high = self._bounds(rules.rounds)

    def _bounds(self, rounds: int) -> tuple[Vector, Vector]:
        """Every entry is 0/1 except the per-seat counts. Scout chips have no rule limit with
        3-5 players (each Scout pays one), so the round's action cap bounds them."""
        low = np.zeros(self.size, np.float32)
        high = np.ones(self.size, np.float32)
        cards = round_cards(self.num_players)
        chips = 3 if self.num_players == 2 else State.max_round_actions
        worst, best = -rounds * self.max_hand, rounds * (cards + chips)
        seats = self.view(low, "seats"), self.view(high, "seats")
        for col, (lo, hi) in enumerate([(0, self.max_hand), (0, cards), (0, chips), (0, 1),
                                        (worst, best)]):
            seats[0][:, col] = lo
            seats[1][:, col] = hi
        return low, high

    def view(self, vector: Vector, name: str) -> Vector:
        """The named segment of ``vector``, shaped (a view: writing to it writes the vector)."""
        seg = self.segments[name]
        return vector[seg.offset : seg.offset + seg.size].reshape(seg.shape)

    # ----- encoding -----------------------------------------------------------------------

    def encode(self, obs: Observation, known: KnownCards | None = None) -> Vector:
        """The vector of ``obs``; ``known`` is the table's knowledge at ``obs`` (rebuilt from its
        history when not given: callers stepping a match keep one and `sync` it)."""
        if known is None:
            known = KnownCards.of(obs, self.hand_size)
        n, me = self.num_players, obs.seat
        off = self._offsets
        out = np.zeros(self.size, np.float32)
        ones: list[int] = []  # every 0/1 entry that is 1, set in one numpy call at the end
        ones.append(off["phase"] + _PHASE_INDEX[obs.phase])
        if obs.phase is Phase.ROTATION and not obs.rotation_chosen:
            ones.append(off["rotation_due"])
        ones.append(off["round"] + obs.round_index)
        ones.append(off["starting_seat"] + (obs.starting_seat - me) % n)
        if obs.phase is Phase.PLAY and obs.current_seat is not None:
            ones.append(off["current_seat"] + (obs.current_seat - me) % n)
        _card_rows(ones, off["hand"], obs.hand)
        _card_rows(ones, off["active_set"], obs.active_set)
        if obs.active_owner is not None:
            ones.append(off["active_owner"] + (obs.active_owner - me) % n)
        seats = off["seats"]
        fields = len(SEAT_FIELDS)
        for seat in range(n):
            row = seats + ((seat - me) % n) * fields
            out[row] = obs.hand_sizes[seat]
            out[row + 1] = obs.captured_counts[seat]
            out[row + 2] = obs.scout_chips[seat]
            out[row + 3] = obs.scout_show_tokens[seat]
            out[row + 4] = obs.scores[seat]
        base = off["known_hands"]
        per_seat = self.max_hand * CARD_ROW
        in_hands: set[tuple[int, int]] = set()
        for seat in range(n):
            pairs = known.hands[seat]
            in_hands.update(p for p in pairs if p is not None)
            if seat == me:
                continue
            at = base + ((seat - me) % n - 1) * per_seat
            for pos, pair in enumerate(pairs):
                row = at + pos * CARD_ROW
                ones.append(row)
                if pair is not None:
                    ones.append(row + pair[0])
                    ones.append(row + 10 + pair[1])
        # Captured this round: every shown card that is neither on the table now nor scouted
        # back into a hand (public: it was seen when shown, and seen taken or not).
        on_table = {c.pair for c in obs.active_set}
        captured, index = off["captured"], self._deck_index
        ones.extend(captured + index[pair] for pair in known.shown - on_table - in_hands)
        out[ones] = 1
        return out


_PHASE_INDEX = {Phase.ROTATION: 0, Phase.PLAY: 1, Phase.MATCH_OVER: 2}


def _card_rows(ones: list[int], offset: int, cards: Sequence[Card]) -> None:
    for i, card in enumerate(cards):
        row = offset + i * CARD_ROW
        ones += (row, row + card.face, row + 10 + card.other)
