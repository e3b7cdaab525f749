"""The referee's wire shortcuts: pre-serialized broadcasts and batches parse as real messages."""

from __future__ import annotations

from scout.v1 import arena_pb2, game_pb2
from scout_arena.server.service import batch_bytes, encode


def _event(i: int) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(public_event=arena_pb2.PublicEvent(
        match_id=f"m-{i}", round_index=i % 3,
        action=game_pb2.PublicAction(seat=i % 4, kind=game_pb2.ACTION_KIND_SHOW,
                                     cards=[game_pb2.Card(face=3, other=7)] * (i % 5),
                                     start=i, length=i % 5)))


def test_a_batch_built_from_bytes_parses_as_a_referee_batch_in_order() -> None:
    messages = [_event(i) for i in range(300)]
    messages[7] = arena_pb2.RefereeMessage(match_ended=arena_pb2.MatchEnded(
        match_id="x" * 200, totals=[1, -2, 3], ranks=[2, 3, 1]))
    parsed = arena_pb2.RefereeMessage.FromString(batch_bytes([encode(m) for m in messages]))
    assert parsed.WhichOneof("body") == "batch"
    assert list(parsed.batch.messages) == messages


def test_encode_passes_bytes_through_and_serializes_messages() -> None:
    message = _event(3)
    data = message.SerializeToString()
    assert encode(data) is data
    assert encode(message) == data


def test_an_empty_message_still_round_trips_in_a_batch() -> None:
    empty = arena_pb2.RefereeMessage()
    parsed = arena_pb2.RefereeMessage.FromString(batch_bytes([encode(empty), encode(_event(1))]))
    assert list(parsed.batch.messages) == [empty, _event(1)]


def test_decision_request_assembled_from_history_bytes_equals_the_message_built_whole() -> None:
    from scout_arena.bots import RandomBot
    from scout_arena.engine import Phase, State
    from scout_arena.server import convert

    checked = 0
    for players in (2, 3, 4, 5):
        state = State.new(players, 11 + players)
        bots = [RandomBot(seat) for seat in range(players)]
        history = bytearray()
        while not state.is_over and checked < 400 * players:
            if state.phase is Phase.ROTATION:
                for seat in range(players):
                    state.choose_rotation(seat, seat % 2 == 1)
                history = bytearray()
                continue
            assert state.current_seat is not None
            obs = state.observation(state.current_seat)
            whole = convert.decision_request(
                obs, "m-1", checked, 1000, 9000,
                [convert.public_action_to_pb(a) for a in obs.history])
            spliced = arena_pb2.RefereeMessage.FromString(convert.decision_request_bytes(
                obs, "m-1", checked, 1000, 9000, bytes(history)))
            assert spliced == whole
            checked += 1
            round_index = state.round_index
            state.apply(bots[state.current_seat].act(obs))
            if state.round_index == round_index and not state.is_over:
                assert state.last_action is not None
                history += convert.history_entry_bytes(
                    convert.public_action_to_pb(state.last_action))
    assert checked > 200
