"""Seeded play that keeps the round's history as the referee's fast path keeps it: as bytes,
one entry appended per action, cleared when a round begins."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from scout_arena.server import convert
from scout_rules import Observation, Phase, State


def requests_with_history(state: State, rng: random.Random,
                          rotate: Callable[[random.Random, int], bool]
                          ) -> Iterator[tuple[Observation, bytes]]:
    """Play ``state`` out by ``rng.choice`` over its legal actions (each seat's rotation by
    ``rotate(rng, seat)``), yielding at each decision the actor's observation and the round's
    history bytes."""
    history = bytearray()
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(state.num_players):
                state.choose_rotation(seat, rotate(rng, seat))
            history = bytearray()
            continue
        assert state.current_seat is not None
        yield state.observation(state.current_seat), bytes(history)
        round_index = state.round_index
        state.apply(rng.choice(state.legal_actions()))
        if state.round_index == round_index and not state.is_over:
            assert state.last_action is not None
            history += convert.history_entry_bytes(convert.public_action_to_pb(state.last_action))
