"""What one seat knows of the round in play, and states of the game consistent with it.

An `InformationSet` is a seat's own hand plus everything public. Replaying the round's public
history it rebuilds the table (the active set, the captured piles, the Scouts since the last
Show), follows every other hand position by position (a card scouted into a hand is public:
which card and where it went in; only the way up it went in is private) and keeps the pool of
cards this seat has not seen. `determinize` fills every unknown position from that pool at
random, turns every card whose way up is private a random way, and sets the engine up there:
a `State` a search can play forward, which ends when the round ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .actions import ActionKind, End, PublicAction
from .cards import Card, SplitMix64, card_of, deck_for, player_count_rules, shuffled_cards
from .errors import BadShape, CardsDontAddUp, InconsistentTable
from .moves import group_key, has_show
from .observation import Observation
from .position import TWO_PLAYER_SCOUT_CHIPS, Position, check_position
from .rounds import Phase
from .snapshots import state_at
from .state import State

__all__ = ["InformationSet"]

Pair = tuple[int, int]
Hands = tuple[tuple[Card, ...], ...]
#: A bot's guess at how far a fill is from how the other seats played (0: it agrees).
Misfits = Callable[[Hands], int]
#: Fills `deal` draws, at most, for one that lets a chipless two-player actor Show.
FILL_TRIES = 10_000


@dataclass(frozen=True)
class _Replay:
    """What the public history says about the table and the other hands."""

    known: tuple[tuple[Card | None, ...], ...]
    captured: tuple[tuple[Card, ...], ...]
    active: tuple[Card, ...]
    owner: int | None
    scouts_since_show: int
    unseen: tuple[Pair, ...]
    unknown: int
    public: int  # cards in the other hands whose place is known


@dataclass(frozen=True)
class InformationSet:
    """The round in play as ``seat`` sees it, in PLAY: its own ``hand`` and the public state.

    ``history``: the round's public actions so far, oldest first. ``excluded``: cards known
    not to be in this round at all (with two players, round 1's cards once round 2 is
    played). The constructor replays the history and raises an `InvalidPosition` subclass
    when it does not add up with the counts. ``known[s][i]``: the card at position ``i`` of
    seat ``s``'s hand when it is public (as it lay on the table: its way up is private), else
    None; this seat's own positions are all None (its hand is ``hand``)."""

    seat: int
    num_players: int
    round_index: int
    hand: tuple[Card, ...]
    hand_sizes: tuple[int, ...]
    captured_counts: tuple[int, ...]
    scout_chips: tuple[int, ...]
    scout_show_tokens: tuple[bool, ...]
    scores: tuple[int, ...]
    current_seat: int
    history: tuple[PublicAction, ...] = ()
    excluded: frozenset[Pair] = frozenset()
    _replay: _Replay = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_replay", _replay(self))
        check_position(self._position(self._any_fill()))

    @classmethod
    def from_observation(cls, observation: Observation,
                         excluded: Iterable[Pair] = ()) -> InformationSet:
        """The information set of an engine observation of a round in play."""
        o = observation
        if o.phase is not Phase.PLAY or o.current_seat is None:
            raise InconsistentTable("an information set is of a round in play")
        return cls(seat=o.seat, num_players=o.num_players, round_index=o.round_index,
                   hand=tuple(o.hand), hand_sizes=o.hand_sizes,
                   captured_counts=o.captured_counts, scout_chips=o.scout_chips,
                   scout_show_tokens=o.scout_show_tokens, scores=o.scores,
                   current_seat=o.current_seat, history=o.history,
                   excluded=frozenset(excluded))

    @classmethod
    def at_round_start(cls, seat: int, num_players: int, round_index: int,
                       hand: Sequence[Card], scores: Sequence[int],
                       excluded: Iterable[Pair] = ()) -> InformationSet:
        """Before the round's first turn, with every seat's rotation made and ``hand`` this
        seat's as it will play it: every other hand is unseen."""
        n = num_players
        rules = player_count_rules(n)
        return cls(seat=seat, num_players=n, round_index=round_index, hand=tuple(hand),
                   hand_sizes=(rules.hand_size,) * n, captured_counts=(0,) * n,
                   scout_chips=(TWO_PLAYER_SCOUT_CHIPS if n == 2 else 0,) * n,
                   scout_show_tokens=(n > 2,) * n, scores=tuple(scores),
                   current_seat=round_index % n, excluded=frozenset(excluded))

    # ----- what the history says --------------------------------------------------------------

    @property
    def known(self) -> tuple[tuple[Card | None, ...], ...]:
        return self._replay.known

    @property
    def active_set(self) -> tuple[Card, ...]:
        return self._replay.active

    @property
    def captured(self) -> tuple[tuple[Card, ...], ...]:
        """Every seat's captured cards (public: each was on the table)."""
        return self._replay.captured

    @property
    def unseen(self) -> tuple[Pair, ...]:
        """The deck's cards this seat cannot place, as (low, high) pairs in deck order: in the
        other hands' unknown positions or, with two players, among the cards not dealt."""
        return self._replay.unseen

    # ----- states consistent with it ----------------------------------------------------------

    def deal(self, rng: random.Random, *, tries: int = 1, misfits: Misfits | None = None
             ) -> Hands:
        """Every seat's hand in one consistent fill: this seat's as it is, each public card in
        its place turned a random way, each unknown position a card drawn from `unseen`
        without replacement, either way up (drawn as a deck is shuffled, seeded from ``rng``).

        With two players, another seat to act with no Scout chip left must hold a group that
        beats the active set (else the round would be over): fills are drawn until one does,
        `InconsistentTable` after `FILL_TRIES`.

        ``misfits``: a bot's own reading of the others' play (how many of their choices a fill
        contradicts); up to ``tries`` fills are drawn and the first it scores 0, else the
        lowest scored, is kept. The rules assume nothing about how anyone plays."""
        hands = self._consistent(rng)
        if misfits is None or tries <= 1:
            return hands
        best = misfits(hands)
        for _ in range(tries - 1):
            if best == 0:
                break
            other = self._consistent(rng)
            score = misfits(other)
            if score < best:
                hands, best = other, score
        return hands

    def _consistent(self, rng: random.Random) -> Hands:
        key = self._show_needed()
        if key is None:
            return self._draw(rng)
        actor = self.current_seat
        for _ in range(FILL_TRIES):
            hands = self._draw(rng)
            if has_show([c.face for c in hands[actor]], key):
                return hands
        raise InconsistentTable(f"no fill of the unseen cards in {FILL_TRIES} lets seat {actor}, "
                                "with no Scout chip left, beat the active set")

    def _show_needed(self) -> int | None:
        """The active set's group key when the acting seat is another one that must Show."""
        r = self._replay
        if self.num_players != 2 or self.current_seat == self.seat or not r.active \
                or self.scout_chips[self.current_seat] != 0:
            return None
        return group_key([c.face for c in r.active])

    def _draw(self, rng: random.Random) -> tuple[tuple[Card, ...], ...]:
        r = self._replay
        pool = shuffled_cards(r.unseen, SplitMix64(rng.getrandbits(64)))
        turns = rng.getrandbits(r.public) if r.public else 0
        hands: list[tuple[Card, ...]] = []
        k = 0
        for s, slots in enumerate(r.known):
            if s == self.seat:
                hands.append(self.hand)
                continue
            hand: list[Card] = []
            for slot in slots:
                if slot is None:
                    hand.append(pool[k])
                    k += 1
                else:
                    hand.append(slot if turns & 1 else card_of(slot.other, slot.face))
                    turns >>= 1
            hands.append(tuple(hand))
        return tuple(hands)

    def determinize(self, rng: random.Random, *, tries: int = 1,
                    misfits: Misfits | None = None) -> State:
        """The engine at this moment with the unseen cards filled by `deal` (``tries`` and
        ``misfits`` as there): a legal, consistent state whose match ends when this round does
        (its scores are then the match totals after the round)."""
        return state_at(State.__new__(State),
                        self._position(self.deal(rng, tries=tries, misfits=misfits)))

    def position(self, hands: Sequence[Sequence[Card]]) -> Position:
        """The `Position` with these hands, checked to fit: this seat's hand as it is, every
        public card where it is (either way up), the rest from `unseen`, each card once."""
        return self._position(self._fit(hands))

    def state(self, hands: Sequence[Sequence[Card]]) -> State:
        """`State.from_position` of `position` (``hands`` checked the same way)."""
        return state_at(State.__new__(State), self.position(hands))

    def _fit(self, hands: Sequence[Sequence[Card]]) -> tuple[tuple[Card, ...], ...]:
        r = self._replay
        if len(hands) != self.num_players:
            raise BadShape(f"one hand per seat ({self.num_players}), not {len(hands)}")
        unseen = set(r.unseen)
        out = []
        for s, (hand, slots) in enumerate(zip(hands, r.known, strict=True)):
            cards = tuple(hand)
            if not all(isinstance(c, Card) for c in cards):
                raise BadShape(f"seat {s}'s hand must hold Cards, got {cards!r}")
            if s == self.seat:
                if cards != self.hand:
                    raise CardsDontAddUp(f"seat {s}'s hand is not this seat's own hand")
            elif len(cards) != len(slots):
                raise BadShape(f"seat {s} holds {len(slots)} cards, not {len(cards)}")
            else:
                for i, (card, slot) in enumerate(zip(cards, slots, strict=True)):
                    if slot is not None:
                        if card.pair != slot.pair:
                            raise CardsDontAddUp(f"seat {s}'s position {i} holds {slot}, "
                                                 f"publicly, not {card}")
                    elif card.pair in unseen:
                        unseen.discard(card.pair)
                    else:
                        raise CardsDontAddUp(f"seat {s}'s position {i}: card {card} is seen "
                                             "elsewhere, not in the deck or given twice")
            out.append(cards)
        return tuple(out)

    def _any_fill(self) -> tuple[tuple[Card, ...], ...]:
        """A fill to check the rest of the position once: without randomness when no seat
        must be able to Show, else `deal`'s with a fixed seed."""
        if self._show_needed() is not None:
            return self.deal(random.Random(0))
        r = self._replay
        pool = iter(r.unseen)
        return tuple(self.hand if s == self.seat else
                     tuple(slot if slot is not None else Card(*next(pool)) for slot in slots)
                     for s, slots in enumerate(r.known))

    def _position(self, hands: tuple[tuple[Card, ...], ...]) -> Position:
        r = self._replay
        return Position(
            num_players=self.num_players, round_index=self.round_index, phase=Phase.PLAY,
            hands=hands, captured=r.captured, scout_chips=self.scout_chips,
            scout_show_tokens=self.scout_show_tokens, scores=self.scores,
            current_seat=self.current_seat, active_set=r.active, active_owner=r.owner,
            scouts_since_show=r.scouts_since_show, history=self.history)


def _replay(info: InformationSet) -> _Replay:
    """Follow the round's public history from the deal."""
    n = info.num_players
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 5:
        raise BadShape(f"SCOUT is played by 2 to 5 players, not {n!r}")
    if not 0 <= info.seat < n:
        raise BadShape(f"seat {info.seat} does not exist in a {n}-player match")
    for name in ("hand_sizes", "captured_counts"):
        if len(getattr(info, name)) != n:
            raise BadShape(f"{name} must hold one entry per seat ({n})")
    rules = player_count_rules(n)
    known: list[list[Card | None]] = [[None] * rules.hand_size for _ in range(n)]
    active: list[Card] = []
    captured: list[list[Card]] = [[] for _ in range(n)]
    seen: set[Pair] = set()  # cards that left a hand for the table, wherever they are now
    owner: int | None = None
    scouts = 0
    for entry in info.history:
        s = entry.seat
        if not 0 <= s < n:
            raise BadShape(f"the history names seat {s}")
        slots = known[s]
        if entry.kind in (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW):
            if not active or entry.insert_at is None or not entry.cards:
                raise InconsistentTable("the history has a Scout without an active set or "
                                        "a position")
            taken = active.pop(0 if entry.end is End.LEFT else -1)
            if taken.pair != entry.cards[0].pair:
                raise InconsistentTable("the history has a Scout take a card the table did "
                                        "not show")
            if not 0 <= entry.insert_at <= len(slots):
                raise InconsistentTable("the history has a Scout into a position outside "
                                        "the hand")
            slots.insert(entry.insert_at, taken)
            if entry.kind is ActionKind.SCOUT and n > 2:
                scouts += 1
        if entry.kind in (ActionKind.SHOW, ActionKind.SCOUT_AND_SHOW):
            shown = entry.shown_cards
            start = entry.start if entry.start is not None else -1
            if start < 0 or start + len(shown) > len(slots) or not shown:
                raise InconsistentTable("the history has a Show outside the hand")
            del slots[start:start + len(shown)]
            seen.update(c.pair for c in shown)
            captured[s].extend(active)
            active = list(shown)
            owner = s
            scouts = 0
        if entry.kind is ActionKind.UNSPECIFIED:
            raise InconsistentTable("the history has an action of no known kind")
    if [len(c) for c in captured] != list(info.captured_counts):
        raise InconsistentTable("the history does not explain the captured counts")
    known[info.seat] = [None] * len(info.hand)
    if [len(h) for h in known] != list(info.hand_sizes):
        raise InconsistentTable("the history does not explain the hand sizes")
    placed = {c.pair for c in info.hand}
    placed.update(slot.pair for h in known for slot in h if slot is not None)
    placed.update(seen)
    placed.update(info.excluded)
    unseen = tuple(p for p in deck_for(n) if p not in placed)
    unknown = sum(1 for s, h in enumerate(known) if s != info.seat
                  for slot in h if slot is None)
    public = sum(1 for s, h in enumerate(known) if s != info.seat
                 for slot in h if slot is not None)
    if unknown > len(unseen):
        raise CardsDontAddUp(f"{unknown} cards in other hands are unknown but only "
                             f"{len(unseen)} of the deck are unseen")
    return _Replay(known=tuple(map(tuple, known)), captured=tuple(map(tuple, captured)),
                   active=tuple(active), owner=owner if active else None,
                   scouts_since_show=scouts, unseen=unseen, unknown=unknown,
                   public=public)
