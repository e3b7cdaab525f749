"""Seeded random matches for the engine's property tests (tests/test_engine_*.py): policies, a
match played to its end with a hook after every action, and card conservation."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from scout_rules import (
    Action,
    Card,
    End,
    Phase,
    Scout,
    ScoutAndShow,
    Show,
    State,
    deal_match,
    deck_for,
)

L, R = End.LEFT, End.RIGHT


# 3-5 players: the engine's decision ends a round that reaches this many actions (a cycle of
# single Shows, each scouted back, could otherwise go on for ever).
MAX_ACTIONS_PER_ROUND = State.max_round_actions


# 2 players: at most 6 Scouts a round, and every Show takes a card out of the 22 + 6 in hands.
MAX_ACTIONS_PER_TWO_PLAYER_ROUND = 6 + 22 + 6


PROPERTY = settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


players = st.integers(min_value=2, max_value=5)


seeds = st.integers(min_value=0, max_value=2**64 - 1)


policy_seeds = st.integers(min_value=0, max_value=2**32 - 1)


def choose(rng: random.Random, actions: list[Action]) -> Action:
    """A random policy that favours Shows (so matches stay short) but plays every kind."""
    shows = [a for a in actions if isinstance(a, Show)]
    both = [a for a in actions if isinstance(a, ScoutAndShow)]
    roll = rng.random()
    if both and roll < 0.15:
        return rng.choice(both)
    if shows and roll < 0.75:
        return rng.choice(shows)
    return rng.choice(actions)


def choose_scouting(rng: random.Random, actions: list[Action]) -> Action:
    """A random policy that mostly Scouts: many unbeaten Shows and spent 2-player chips."""
    scouts = [a for a in actions if isinstance(a, Scout)]
    if scouts and rng.random() < 0.7:
        return rng.choice(scouts)
    return choose(rng, actions)


def play(
    n: int,
    seed: int,
    policy_seed: int,
    at_decision: Callable[[State, int], None] | None = None,
    after_action: Callable[[State, State, Action], None] | None = None,
    policy: Callable[[random.Random, list[Action]], Action] = choose,
) -> State:
    """Play a whole seeded match; call the hooks before each decision / after each action."""
    rng = random.Random(policy_seed)
    state = State.new(n, seed)
    decision = 0
    in_round = 0
    rounds_done = 0
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in state.pending_rotations():
                state.choose_rotation(seat, rng.random() < 0.5)
            continue
        actions = state.legal_actions()
        assert actions, "the player to act always has a legal action"
        if at_decision is not None:
            at_decision(state, decision)
        action = policy(rng, actions)
        before = state.clone() if after_action is not None else state
        state.apply(action)
        if after_action is not None:
            after_action(before, state, action)
        decision += 1
        in_round += 1
        if len(state.round_results) > rounds_done:
            rounds_done = len(state.round_results)
            in_round = 0
        cap = MAX_ACTIONS_PER_TWO_PLAYER_ROUND if n == 2 else MAX_ACTIONS_PER_ROUND
        assert in_round < cap, f"round {state.round_index + 1} has not ended after {cap} actions"
    return state


def pairs_of(cards: Sequence[Card]) -> list[tuple[int, int]]:
    return [c.pair for c in cards]


def conservation(state: State, seed: int) -> None:
    n = state.num_players
    here = [p for s in range(n) for p in pairs_of(state.hand(s))]
    here += [p for cs in state.captured for p in pairs_of(cs)]
    here += pairs_of(state.active_set)
    assert Counter(here) == Counter(state.cards_in_play())
    unused: list[tuple[int, int]] = []
    if n == 2:
        other = deal_match(2, seed)[1 - state.round_index]
        unused = [c.pair for h in other for c in h]
    assert sorted(here + unused) == sorted(deck_for(n))


def cards_in(value: Any) -> Iterator[Card]:
    """Every Card anywhere inside an observation: dataclass fields, tuples, lists, dicts."""
    if isinstance(value, Card):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from cards_in(getattr(value, f.name))
    elif isinstance(value, tuple | list | set | frozenset):
        for item in value:
            yield from cards_in(item)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from cards_in(k)
            yield from cards_in(v)
