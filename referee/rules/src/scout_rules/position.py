"""A position of a round in play, given in full, and the checks that it is one the game can reach.

`Position` is to `State.from_position` what a FEN string is to python-chess's ``Board``: every
hand, the table, the counters and whose turn it is. A state set up from a position knows the
match from there on only (its logs start at that point), plays the round out by the rules and,
when ``later_deals`` are given, the rounds after it; the match ends after the last round dealt.
`check_position` raises an `InvalidPosition` subclass by cause for anything play cannot reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .actions import PublicAction
from .cards import Card, Hand, deck_for, player_count_rules
from .errors import BadShape, CardsDontAddUp, InconsistentTable, MalformedAction
from .moves import group_key, has_show
from .rounds import MAX_ROUND_ACTIONS, Phase

__all__ = ["Position", "check_position", "validated_deals"]

TWO_PLAYER_SCOUT_CHIPS = 3
Deal = tuple[Hand, ...]


@dataclass(frozen=True, slots=True)
class Position:
    """One moment of a round in play (phase ROTATION or PLAY), everything about it.

    ``hands``: every seat's hand as held now (a seat that chose to rotate holds it rotated).
    ``scores``: the match totals before this round. ``current_seat``: the seat to act (None
    while rotations are chosen). ``active_owner``: who showed the active set (None when the
    table is clear). ``scouts_since_show``: 3-5 players, plain Scouts since the last Show.
    ``rotations``: each seat's rotation choice, None while not made; ``()`` in play when they
    are not known (a bot's view). ``history``: the round's public actions so far, as seats saw
    them (what observations show; not replayed). ``actions_played``: the round's actions so
    far, for the action limit (None: ``len(history)``). ``later_deals``: the dealt hands of the
    rounds after this one, in order; the match ends after the last (with none, after this one).
    """

    num_players: int
    round_index: int
    phase: Phase
    hands: tuple[tuple[Card, ...], ...]
    captured: tuple[tuple[Card, ...], ...]
    scout_chips: tuple[int, ...]
    scout_show_tokens: tuple[bool, ...]
    scores: tuple[int, ...]
    current_seat: int | None
    active_set: tuple[Card, ...] = ()
    active_owner: int | None = None
    scouts_since_show: int = 0
    rotations: tuple[bool | None, ...] = ()
    history: tuple[PublicAction, ...] = ()
    actions_played: int | None = None
    later_deals: tuple[tuple[tuple[Card, ...], ...], ...] = ()

    @property
    def starting_seat(self) -> int:
        return self.round_index % self.num_players

    @property
    def round_actions(self) -> int:
        """The round's actions so far (what the action limit counts)."""
        return len(self.history) if self.actions_played is None else self.actions_played


def _per_seat(name: str, values: Sequence[object], n: int) -> None:
    if not isinstance(values, tuple) or len(values) != n:
        raise BadShape(f"{name} must be a tuple of one entry per seat ({n}), got {values!r}")


def _seat(name: str, seat: object, n: int) -> None:
    if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < n:
        raise BadShape(f"{name} must be a seat 0-{n - 1}, got {seat!r}")


def _cards(name: str, cards: object) -> tuple[Card, ...]:
    if not isinstance(cards, tuple) or not all(isinstance(c, Card) for c in cards):
        raise BadShape(f"{name} must be a tuple of Cards, got {cards!r}")
    return cards


def _check_deck(where: str, cards: Sequence[Card], deck: set[tuple[int, int]],
                seen: set[tuple[int, int]]) -> None:
    for card in cards:
        pair = card.pair
        if pair not in deck:
            raise CardsDontAddUp(f"{where}: card {card} is not in this player count's deck")
        if pair in seen:
            raise CardsDontAddUp(f"{where}: card {card} is in two places")
        seen.add(pair)


def check_position(p: Position) -> None:
    """Raise `BadShape`, `CardsDontAddUp` or `InconsistentTable` unless play can reach ``p``."""
    n = p.num_players
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 5:
        raise BadShape(f"SCOUT is played by 2 to 5 players, not {n!r}")
    rules = player_count_rules(n)
    if not isinstance(p.round_index, int) or not 0 <= p.round_index < rules.rounds:
        raise BadShape(f"a {n}-player match has rounds 0-{rules.rounds - 1}, "
                       f"not {p.round_index!r}")
    if p.round_index + len(p.later_deals) >= rules.rounds:
        raise BadShape(f"round {p.round_index} and {len(p.later_deals)} later deals make more "
                       f"than the {rules.rounds} rounds of a {n}-player match")
    for name in ("hands", "captured", "scout_chips", "scout_show_tokens", "scores"):
        _per_seat(name, getattr(p, name), n)
    hands = [_cards(f"seat {s}'s hand", h) for s, h in enumerate(p.hands)]
    captured = [_cards(f"seat {s}'s captured cards", c) for s, c in enumerate(p.captured)]
    active = _cards("the active set", p.active_set)
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
               for c in p.scout_chips):
        raise BadShape(f"Scout chips are counts, got {p.scout_chips!r}")
    if n == 2 and any(c > TWO_PLAYER_SCOUT_CHIPS for c in p.scout_chips):
        raise BadShape(f"2 players start a round with {TWO_PLAYER_SCOUT_CHIPS} Scout chips "
                       f"each, not more: {p.scout_chips!r}")
    if not all(isinstance(t, bool) for t in p.scout_show_tokens):
        raise BadShape(f"Scout & Show tokens are true or false, got {p.scout_show_tokens!r}")
    if n == 2 and any(p.scout_show_tokens):
        raise BadShape("Scout & Show is not part of the 2-player game")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in p.scores):
        raise BadShape(f"scores are integers, got {p.scores!r}")
    if p.rotations != () and len(p.rotations) != n:
        raise BadShape(f"rotations are one per seat ({n}) or () when unknown")
    actions = p.round_actions
    if not isinstance(actions, int) or not len(p.history) <= actions < MAX_ROUND_ACTIONS:
        raise BadShape(f"the round has played {actions!r} actions: at least the "
                       f"{len(p.history)} of its history, fewer than {MAX_ROUND_ACTIONS}")
    for action in p.history:
        if not isinstance(action, PublicAction):
            raise BadShape(f"the history holds PublicActions, not {action!r}")
        _seat("a history entry's seat", action.seat, n)
    _check_cards(p, hands, captured, active)
    if p.phase is Phase.ROTATION:
        _check_rotation_phase(p, hands)
    elif p.phase is Phase.PLAY:
        _check_play_phase(p, hands, active)
    else:
        raise BadShape(f"a position is in the ROTATION or PLAY phase, not {p.phase!r}")


def _check_cards(p: Position, hands: list[tuple[Card, ...]],
                 captured: list[tuple[Card, ...]], active: tuple[Card, ...]) -> None:
    n = p.num_players
    rules = player_count_rules(n)
    deck = set(deck_for(n))
    seen: set[tuple[int, int]] = set()
    for s in range(n):
        _check_deck(f"seat {s}'s hand", hands[s], deck, seen)
        _check_deck(f"seat {s}'s captured cards", captured[s], deck, seen)
    _check_deck("the active set", active, deck, seen)
    if len(seen) != n * rules.hand_size:
        raise CardsDontAddUp(f"a {n}-player round holds {n * rules.hand_size} cards in hands, "
                             f"captured piles and the active set, not {len(seen)}")
    used = set(seen)
    for r, deal in enumerate(p.later_deals, start=p.round_index + 1):
        where = f"round {r}'s deal"
        if not isinstance(deal, tuple) or len(deal) != n:
            raise BadShape(f"{where} must be a tuple of one hand per seat ({n})")
        in_round: set[tuple[int, int]] = set() if n > 2 else used
        for s, hand in enumerate(deal):
            if len(_cards(f"{where}, seat {s}", hand)) != rules.hand_size:
                raise BadShape(f"{where}: seat {s} is dealt {len(hand)} cards, "
                               f"not {rules.hand_size}")
            _check_deck(f"{where}, seat {s}", hand, deck, in_round)


def _check_rotation_phase(p: Position, hands: list[tuple[Card, ...]]) -> None:
    n = p.num_players
    rules = player_count_rules(n)
    if any(len(h) != rules.hand_size for h in hands):
        raise InconsistentTable(f"before the first turn every hand holds {rules.hand_size} "
                                "cards")
    if p.active_set or any(p.captured) or p.history or p.round_actions or p.scouts_since_show:
        raise InconsistentTable("before the first turn nothing is on the table and nothing "
                                "has been played")
    if p.current_seat is not None or p.active_owner is not None:
        raise InconsistentTable("no seat is to act while rotations are chosen")
    if p.scout_chips != (TWO_PLAYER_SCOUT_CHIPS if n == 2 else 0,) * n \
            or p.scout_show_tokens != (n > 2,) * n:
        raise InconsistentTable("before the first turn the Scout chips and the Scout & Show "
                                "tokens are as dealt")
    if p.rotations and None not in p.rotations:
        raise InconsistentTable("every seat has chosen its rotation: the round is in play")
    if not all(r is None or isinstance(r, bool) for r in p.rotations):
        raise BadShape(f"a rotation choice is true, false or None, got {p.rotations!r}")


def _check_play_phase(p: Position, hands: list[tuple[Card, ...]],
                      active: tuple[Card, ...]) -> None:
    n = p.num_players
    if not all(isinstance(r, bool) for r in p.rotations):
        raise InconsistentTable("in play every seat has chosen its rotation")
    _seat("the seat to act", p.current_seat, n)
    seat = p.current_seat
    assert seat is not None
    if not all(hands):
        raise InconsistentTable("a seat's hand is empty: the round is over")
    scouts = p.scouts_since_show
    if not isinstance(scouts, int) or not 0 <= scouts <= (0 if n == 2 else n - 2):
        raise BadShape(f"{scouts!r} Scouts since the last Show: "
                       + ("2 players do not count them" if n == 2 else
                          f"at most {n - 2} before the round ends"))
    if not active:
        if p.active_owner is not None:
            raise InconsistentTable("the table is clear, yet the active set has an owner")
        return
    if group_key([c.face for c in active]) < 0:
        raise InconsistentTable(f"the active set {' '.join(str(c.face) for c in active)} is "
                                "neither a set nor a run")
    _seat("the active set's owner", p.active_owner, n)
    owner = p.active_owner
    assert owner is not None
    if n > 2 and seat != (owner + 1 + scouts) % n:
        raise InconsistentTable(f"seat {owner} showed and {scouts} seats scouted since: seat "
                                f"{(owner + 1 + scouts) % n} acts, not seat {seat}")
    if n == 2 and seat == owner:
        raise InconsistentTable("the seat to act owns the active set")
    if n == 2 and p.scout_chips[seat] == 0 \
            and not has_show([c.face for c in hands[seat]], group_key([c.face for c in active])):
        raise InconsistentTable(f"seat {seat} can neither Show nor Scout: the round is over")


def validated_deals(num_players: int, deals: Sequence[Sequence[Sequence[Card]]]
                    ) -> tuple[Deal, ...]:
    """A match's explicit deal (`State.from_deals`), checked card by card."""
    rules = player_count_rules(num_players)
    if len(deals) != rules.rounds:
        raise MalformedAction(f"a {num_players}-player match has {rules.rounds} rounds of deals, "
                              f"got {len(deals)}")
    deck = set(deck_for(num_players))
    out = []
    for r, round_hands in enumerate(deals):
        if len(round_hands) != num_players:
            raise MalformedAction(f"round {r + 1} deals {len(round_hands)} hands, "
                                  f"not {num_players}")
        seen: set[tuple[int, int]] = set()
        hands = []
        for seat, hand in enumerate(round_hands):
            if len(hand) != rules.hand_size:
                raise MalformedAction(f"round {r + 1}: seat {seat} is dealt {len(hand)} cards, "
                                      f"not {rules.hand_size}")
            cards = Hand(Card(int(c[0]), int(c[1])) for c in hand)
            for card in cards:
                if card.pair not in deck or card.pair in seen:
                    raise MalformedAction(f"round {r + 1}: card {card} is not in the "
                                          f"{num_players}-player deck or is dealt twice")
                seen.add(card.pair)
            hands.append(cards)
        out.append(tuple(hands))
    round_pairs = [{c.pair for h in r for c in h} for r in out]
    if num_players == 2 and round_pairs[0] & round_pairs[1]:
        raise MalformedAction("with 2 players round 2 is dealt the 22 cards round 1 did not use")
    return tuple(out)
