"""The SDK converts each action of a round's history once (`convert.RoundHistories`): what a bot
gets is the same Observation as a fresh conversion, whatever order requests come in."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from scout.v1 import arena_pb2
from scout_arena.server import convert as wire
from scout_client import convert as sdk_wire
from scout_rules import Phase, State


def requests_of_a_match(players: int, seed: int) -> list[arena_pb2.DecisionRequest]:
    """Every DecisionRequest of one match with random legal play, as the referee encodes them."""
    rng = random.Random(seed)
    state = State.new(players, seed)
    out: list[arena_pb2.DecisionRequest] = []
    request_id = 0
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(players):
                state.choose_rotation(seat, rng.random() < 0.5)
            continue
        actor = state.current_seat
        assert actor is not None
        request_id += 1
        message = wire.decision_request(state.observation(actor), "m-1", request_id, 1000, 5000)
        out.append(arena_pb2.RefereeMessage.FromString(
            message.SerializeToString()).decision_request)
        state.apply(rng.choice(state.legal_actions()))
    return out


@settings(max_examples=25, deadline=None)
@given(players=st.integers(2, 5), seed=st.integers(0, 2**32))
def test_cached_history_conversion_equals_a_fresh_one_for_every_request(players: int,
                                                                        seed: int) -> None:
    histories = sdk_wire.RoundHistories()
    requests = requests_of_a_match(players, seed)
    assert len({r.observation.round_index for r in requests}) == players if players > 2 else 2
    for request in requests:
        cached = sdk_wire.decision_request_from_proto(request, histories)
        assert cached == sdk_wire.decision_request_from_proto(request)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), order=st.randoms(use_true_random=False))
def test_requests_out_of_order_or_rewritten_are_converted_afresh(seed: int,
                                                                  order: random.Random) -> None:
    """A referee that breaks the append-only history (requests replayed out of order, an action
    rewritten) still gets exactly what it sent converted: the cache never serves a stale entry."""
    requests = requests_of_a_match(3, seed)
    order.shuffle(requests)
    longest = max(requests, key=lambda r: len(r.observation.history))
    tampered = arena_pb2.DecisionRequest()
    tampered.CopyFrom(longest)
    if tampered.observation.history:
        tampered.observation.history[-1].seat = (tampered.observation.history[-1].seat + 1) % 3
    histories = sdk_wire.RoundHistories()
    for request in [*requests, longest, tampered, *requests[:5]]:
        assert (sdk_wire.decision_request_from_proto(request, histories)
                == sdk_wire.decision_request_from_proto(request))


def test_a_finished_match_lets_go_of_its_history_and_the_cache_is_bounded() -> None:
    histories = sdk_wire.RoundHistories()
    request = next(r for r in requests_of_a_match(2, 5) if r.observation.history)
    sdk_wire.referee_message_from_proto(
        arena_pb2.RefereeMessage(decision_request=request), histories)
    assert len(histories._by_match) == 1
    sdk_wire.referee_message_from_proto(
        arena_pb2.RefereeMessage(match_ended=arena_pb2.MatchEnded(match_id="m-1")), histories)
    assert len(histories._by_match) == 0
    for i in range(sdk_wire.RoundHistories.MAX_MATCHES + 10):
        histories.convert(f"m-{i}", 0, request.observation.history)
    assert len(histories._by_match) == sdk_wire.RoundHistories.MAX_MATCHES
