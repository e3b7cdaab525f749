"""The one codec between the rules package's values and scout.v1 (`scout_codec`): every value
the referee and the SDK exchange reads back as it was written, unreadable actions are refused
with the referee's words, and both sides convert through it rather than a copy of their own."""

from __future__ import annotations

import random

import pytest
import scout_codec
from scout.v1 import game_pb2
from scout_rules import Action, MalformedAction, Phase, State
from scout_rules import protocol as p


def test_every_action_and_public_action_of_played_matches_reads_back_as_written() -> None:
    rng = random.Random(5)
    kinds: set[str] = set()
    for players in (2, 3, 4, 5):
        state = State.new(players, players)
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                for seat in range(players):
                    state.choose_rotation(seat, rng.random() < 0.5)
                continue
            action: Action = rng.choice(state.legal_actions())
            assert scout_codec.action_from_proto(scout_codec.action_to_proto(action)) == action
            state.apply(action)
            played = state.last_action
            assert played is not None
            kinds.add(played.kind)
            for by_referee in (False, True):
                message = scout_codec.public_action_to_proto(played, by_referee)
                read = scout_codec.public_action_from_proto(message)
                assert read == played._replace(by_referee=by_referee)
    assert kinds == {"show", "scout", "scout_and_show"}


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (game_pb2.Action(), "the action is empty"),
        (game_pb2.Action(scout=game_pb2.Scout(flip=True)), "a Scout must name its end"),
        (
            game_pb2.Action(
                scout_and_show=game_pb2.ScoutAndShow(scout=game_pb2.Scout(end=game_pb2.END_LEFT))
            ),
            "needs both its scout and its show part",
        ),
    ],
)
def test_unreadable_actions_are_malformed_with_the_reason_a_bot_is_told(
    action: game_pb2.Action, reason: str
) -> None:
    with pytest.raises(MalformedAction, match=reason):
        scout_codec.action_from_proto(action)


def test_every_protocol_value_reads_back_as_written() -> None:
    for status in p.AnswerStatus:
        result = p.AnswerResult("m", 7, status, "why", 2, 900)
        assert (
            scout_codec.answer_result_from_proto(scout_codec.answer_result_to_proto(result))
            == result
        )
    for reason in p.GoodbyeReason:
        goodbye = p.Goodbye(reason, "bye", reconnect=True, retry_after_ms=50)
        assert scout_codec.goodbye_from_proto(scout_codec.goodbye_to_proto(goodbye)) == goodbye
    for end_status in p.MatchEndStatus:
        ended = p.MatchEnded("m", (3, 1), (1, 2), (1,), "r-1", end_status, "done")
        assert scout_codec.match_ended_from_proto(scout_codec.match_ended_to_proto(ended)) == ended
    welcome = p.Welcome(1, "greedy", "s-1", True)
    assert scout_codec.welcome_from_proto(scout_codec.welcome_to_proto(welcome)) == welcome
    assignment = p.Assignment("m", "127.0.0.1:1", "t", tls=True)
    assert (
        scout_codec.assignment_from_proto(scout_codec.assignment_to_proto(assignment)) == assignment
    )
    probation = p.Probation(True, "slow", lifted_by_reconnect=True)
    assert scout_codec.probation_from_proto(scout_codec.probation_to_proto(probation)) == probation
    for time_control in (p.TimeControl(), p.TimeControl(700, 0), p.TimeControl(1, 600_000)):
        message = scout_codec.time_control_to_proto(time_control)
        assert message.no_time_bank == (time_control.time_bank_ms == 0)
        assert scout_codec.time_control_from_proto(message) == time_control


def test_a_match_start_tells_the_bot_the_referees_own_time_control() -> None:
    """One TimeControl from the referee's clock to a bot's MatchStart (and the SDK's local
    matches), so a default can never differ between the two sides."""
    import scout_client
    from scout_arena.server.clock import DEFAULT_TIME_CONTROL
    from scout_client import convert as sdk
    from scout_client import testing

    assert scout_client.TimeControl is p.TimeControl
    assert p.TimeControl(p.DEFAULT_DECISION_MS, p.DEFAULT_TIME_BANK_MS) == DEFAULT_TIME_CONTROL
    start = scout_client.MatchStart("m", 1, ("a", "b"), 2, 2, p.TimeControl(700, 0), False, 0, 0)
    message = testing.referee_message_to_proto(start)
    assert message.match_start.time_control.no_time_bank
    assert sdk.referee_message_from_proto(message) == start


def test_the_referee_and_the_sdk_convert_through_the_one_codec() -> None:
    from scout_arena.server import convert as referee
    from scout_client import convert as sdk
    from scout_client import testing

    assert referee.action_to_pb is sdk.action_to_proto is scout_codec.action_to_proto
    assert referee.action_from_pb is scout_codec.action_from_proto
    assert referee.public_action_to_pb is scout_codec.public_action_to_proto
    assert sdk.public_action_from_proto is scout_codec.public_action_from_proto
    assert sdk.scout_from_proto is scout_codec.scout_from_proto
    assert testing.answer_result_to_proto is scout_codec.answer_result_to_proto
    assert testing.match_ended_to_proto is scout_codec.match_ended_to_proto
    assert sdk.STATUS_FROM_PROTO is scout_codec.STATUS_FROM_PROTO
