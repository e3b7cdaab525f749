"""Hand-built deals for the rules tests (tests/test_rules_*.py), so that every position is exactly
controlled.

Deals are built by `build_deals`: the cards a test cares about are placed at the left of a hand
(an int means "a card with this face value", a `Card` is that exact card) and the rest of the
hand is filled with unused cards chosen so that no two neighbouring filler faces form a group."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from scout_rules import (
    Card,
    End,
    Phase,
    ScoutError,
    Show,
    State,
    deck_for,
    player_count_rules,
)

from support.states import snapshot

L, R = End.LEFT, End.RIGHT


CardSpec = int | Card


DealSpec = Mapping[int, Mapping[int, Sequence[CardSpec]]]


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _match_faces(wanted: Sequence[int], free: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """A distinct free card for every wanted face value (bipartite matching, augmenting paths;
    higher other values are preferred)."""
    options = [
        [_pair(f, o) for o in range(10, 0, -1) if o != f and _pair(f, o) in free] for f in wanted
    ]
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
        wanted = {
            (r, seat, i): c
            for r in rounds
            for seat, cards in spec.get(r, {}).items()
            for i, c in enumerate(cards)
            if not isinstance(c, Card)
        }
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
