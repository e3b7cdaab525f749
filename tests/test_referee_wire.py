"""The referee's wire shortcuts: pre-serialized broadcasts parse as real messages."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from scout.v1 import arena_pb2, game_pb2
from scout_arena.server.arena_service import encode


def _event(i: int) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(public_event=arena_pb2.PublicEvent(
        match_id=f"m-{i}", round_index=i % 3,
        action=game_pb2.PublicAction(seat=i % 4, kind=game_pb2.ACTION_KIND_SHOW,
                                     cards=[game_pb2.Card(face=3, other=7)] * (i % 5),
                                     start=i, length=i % 5)))


def test_encode_passes_bytes_through_and_serializes_messages() -> None:
    message = _event(3)
    data = message.SerializeToString()
    assert encode(data) is data
    assert encode(message) == data


def test_decision_request_assembled_from_history_bytes_equals_the_message_built_whole() -> None:
    from scout_arena.server import convert
    from scout_rules import State
    from support.wire_history import requests_with_history

    rng = random.Random(11)
    checked = 0
    for players in (2, 3, 4, 5):
        state = State.new(players, 11 + players)
        for obs, history in requests_with_history(state, rng, lambda _, seat: seat % 2 == 1):
            whole = convert.decision_request(
                obs, "m-1", checked, 1000, 9000,
                [convert.public_action_to_pb(a) for a in obs.history])
            spliced = arena_pb2.RefereeMessage.FromString(convert.decision_request_bytes(
                obs, "m-1", checked, 1000, 9000, history))
            assert spliced == whole
            checked += 1
            if checked >= 400 * players:
                break
    assert checked > 200


def test_a_match_wire_serializes_each_event_as_the_message_built_whole() -> None:
    """The events a match emits, through `MatchWire` (history spliced from bytes, fallbacks
    marked by_referee, actions no stream is sent kept by `played`), parse as the messages the
    plain converters build."""
    from scout_arena.server import convert
    from scout_arena.server.events import (
        ActionPlayed,
        AnswerResult,
        AnswerStatus,
        DecisionRequested,
    )
    from scout_rules import Phase, State

    state = State.new(4, 5)
    rng = random.Random(5)
    wire = convert.MatchWire()
    history: list[game_pb2.PublicAction] = []
    round_index = -1
    decisions = 0
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(4):
                state.choose_rotation(seat, False)
            continue
        assert state.current_seat is not None
        if state.round_index != round_index:
            round_index, history = state.round_index, []
        obs = state.observation(state.current_seat)
        decisions += 1
        got = arena_pb2.RefereeMessage.FromString(
            wire.encode(DecisionRequested("m-1", decisions, obs, 1000, 9000)))
        assert got == convert.decision_request(obs, "m-1", decisions, 1000, 9000, history)
        by_referee = decisions % 3 == 0
        before = state.round_index
        state.apply(rng.choice(state.legal_actions()))
        assert state.last_action is not None
        played = ActionPlayed("m-1", before, state.last_action, by_referee)
        if decisions % 4 == 1:  # a table of lean streams: kept, not sent
            wire.played(played)
            history.append(convert.public_action_to_pb(state.last_action, by_referee))
            continue
        sent = arena_pb2.RefereeMessage.FromString(wire.encode(played))
        assert sent == convert.referee_message(played)
        assert sent.public_event.action.by_referee is by_referee
        history.append(sent.public_event.action)
    assert decisions > 50
    judged = AnswerResult("m-1", 7, AnswerStatus.ILLEGAL, "no", strikes=2, time_bank_ms=300)
    assert arena_pb2.RefereeMessage.FromString(wire.encode(judged)).answer_result == \
        arena_pb2.AnswerResult(match_id="m-1", request_id=7,
                               status=arena_pb2.ANSWER_STATUS_ILLEGAL, reason="no", strikes=2,
                               time_bank_ms=300)


def test_bot_messages_read_into_answers_or_a_protocol_error() -> None:
    from scout_arena.server.convert import read_answer
    from scout_arena.server.events import ActionAnswer, RotationAnswer
    from scout_rules import Show

    show = arena_pb2.BotMessage(action=arena_pb2.ActionChoice(
        match_id="m", request_id=3, action=game_pb2.Action(show=game_pb2.Show(start=1, length=2))))
    assert read_answer(show) == ActionAnswer("m", 3, Show(1, 2))
    empty = read_answer(arena_pb2.BotMessage(action=arena_pb2.ActionChoice(match_id="m")))
    assert isinstance(empty, ActionAnswer) and empty.action is None and "empty" in empty.unreadable
    rotate = arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(match_id="m", request_id=1,
                                                                    rotate=True))
    assert read_answer(rotate) == RotationAnswer("m", 1, True)
    for message in (arena_pb2.BotMessage(), arena_pb2.BotMessage(hello=arena_pb2.Hello())):
        error = read_answer(message)
        assert isinstance(error, arena_pb2.RefereeMessage)
        assert error.error.code == arena_pb2.ERROR_CODE_BAD_MESSAGE and error.error.message


def test_every_kind_of_match_request_error_has_its_documented_status() -> None:
    import grpc
    from scout_arena.server import errors
    from scout_arena.server.matches_service import match_request_status

    expected = {
        errors.RefereeClosing: grpc.StatusCode.UNAVAILABLE,
        errors.InvalidTable: grpc.StatusCode.INVALID_ARGUMENT,
        errors.InvalidTimeControl: grpc.StatusCode.INVALID_ARGUMENT,
        errors.UnknownBot: grpc.StatusCode.NOT_FOUND,
        errors.BotNotConnected: grpc.StatusCode.FAILED_PRECONDITION,
        errors.BotAtCapacity: grpc.StatusCode.FAILED_PRECONDITION,
        errors.InvalidBotName: grpc.StatusCode.INVALID_ARGUMENT,
        errors.InvalidIdempotencyKey: grpc.StatusCode.INVALID_ARGUMENT,
        errors.IdempotencyKeyReused: grpc.StatusCode.ALREADY_EXISTS,
    }
    kinds = {cls for cls in vars(errors).values() if isinstance(cls, type)
             and issubclass(cls, errors.MatchRequestError) and cls is not errors.MatchRequestError}
    assert kinds == set(expected)
    for kind, status in expected.items():
        assert match_request_status(kind("why")) == status


def test_the_referee_logic_knows_no_wire() -> None:
    """Only the servicers (`service`) and the wire (`convert`) speak gRPC and scout.v1; the
    match logic, the clock, the connections, the events and the facade import neither."""
    import ast
    from pathlib import Path

    import scout_arena.server

    root = Path(scout_arena.server.__file__).parent
    for name in ("clock", "connections", "errors", "events", "facade", "match", "referee"):
        tree = ast.parse((root / f"{name}.py").read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        wire = {m for m in imported if m.split(".")[0] in {"grpc", "scout", "google"}}
        assert not wire, f"{name}.py imports {sorted(wire)}"


@settings(max_examples=40, deadline=None)
@given(players=st.integers(2, 5), seed=st.integers(0, 2**64 - 1),
       rotations=st.integers(0, 31), plays=st.integers(0, 2**32))
def test_observation_written_field_by_field_is_the_message_serialized(
        players: int, seed: int, rotations: int, plays: int) -> None:
    """`observation_bytes` (what every DecisionRequest carries) against `observation_to_pb`,
    byte for byte, for every seat, through whole matches: negative scores, no active set,
    an owner at seat 0, a seat that is not to act."""
    from scout_arena.server import convert
    from scout_rules import Phase, State

    state = State.new(players, seed)
    rng = random.Random(plays)
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(players):
                state.choose_rotation(seat, bool(rotations >> seat & 1))
            continue
        for seat in range(players):
            obs = state.observation(seat)
            assert convert.observation_bytes(obs, f"m-{seed:x}") == \
                convert.observation_to_pb(obs, f"m-{seed:x}", ()).SerializeToString()
        state.apply(rng.choice(state.legal_actions()))


def test_public_action_bytes_equal_the_serialized_message_for_every_kind_of_action() -> None:
    """`public_action_bytes` (the history entry and the PublicEvent's action) writes the
    same bytes as serializing `public_action_to_pb`: every action of random 2-5 player matches,
    by a bot or by the referee, with zero starts, positions and seats among them."""
    from scout_arena.server import convert
    from scout_rules import Phase, State

    rng = random.Random(3)
    kinds: set[str] = set()
    for players in (2, 3, 4, 5):
        for seed in range(6):
            state = State.new(players, seed)
            while not state.is_over:
                if state.phase is Phase.ROTATION:
                    for seat in range(players):
                        state.choose_rotation(seat, rng.random() < 0.5)
                    continue
                state.apply(rng.choice(state.legal_actions()))
                action = state.last_action
                assert action is not None
                kinds.add(action.kind)
                for by_referee in (False, True):
                    assert convert.public_action_bytes(action, by_referee) == \
                        convert.public_action_to_pb(action, by_referee).SerializeToString()
    assert kinds == {"show", "scout", "scout_and_show"}


def test_every_match_ending_says_its_status_on_the_wire_finished_included() -> None:
    """A finished match says FINISHED explicitly (two bytes more than before issue 28: a
    client reads 0 as FINISHED too, but a new one need not guess); an aborted or voided one
    has no result, only its status and reason."""
    from scout_arena.server import convert
    from scout_arena.server.events import MatchEnded, MatchEndStatus

    wire = convert.MatchWire()
    finished = MatchEnded("m-1", (3, -2), (1, 2), (), record_id="m-1")
    data = wire.encode(finished)
    ended = arena_pb2.RefereeMessage.FromString(data).match_ended
    assert ended.status == arena_pb2.MATCH_END_STATUS_FINISHED and not ended.reason
    unset = arena_pb2.RefereeMessage(match_ended=arena_pb2.MatchEnded(
        match_id="m-1", totals=[3, -2], ranks=[1, 2], record_id="m-1"))
    assert len(data) == len(unset.SerializeToString()) + 2
    for status, pb in ((MatchEndStatus.ABORTED, arena_pb2.MATCH_END_STATUS_ABORTED),
                       (MatchEndStatus.VOIDED, arena_pb2.MATCH_END_STATUS_VOIDED)):
        sent = arena_pb2.RefereeMessage.FromString(
            wire.encode(MatchEnded("m-2", status=status, reason="why"))).match_ended
        assert sent == arena_pb2.MatchEnded(match_id="m-2", status=pb, reason="why")
