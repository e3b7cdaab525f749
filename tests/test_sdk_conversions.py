"""The SDK's conversions between its values and the wire messages, both ways."""

from __future__ import annotations

import pytest
from scout.v1 import arena_pb2, game_pb2
from scout_client import (
    ActionChoice,
    ActionKind,
    AnswerResult,
    AnswerStatus,
    Card,
    ErrorCode,
    Hello,
    MatchEnded,
    MatchStart,
    ProtocolError,
    PublicAction,
    PublicEvent,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    RoundEndReason,
    Scout,
    ScoutAndShow,
    Show,
    TimeControl,
    Welcome,
    convert,
    testing,
)
from scout_client.types import BotMessage, RefereeMessage
from support.sdk_fakes import LEFT, RIGHT, cards, observation


def full_decision_request() -> arena_pb2.DecisionRequest:
    c = game_pb2.Card
    return arena_pb2.DecisionRequest(
        match_id="m7",
        request_id=42,
        observation=game_pb2.Observation(
            match_id="m7",
            seat=2,
            num_players=3,
            round_index=1,
            num_rounds=3,
            starting_seat=1,
            hand=[c(face=3, other=7), c(face=4, other=1)],
            hand_sizes=[5, 6, 2],
            active_set=[c(face=5, other=9), c(face=5, other=2)],
            active_owner=0,
            captured_counts=[1, 0, 2],
            scout_chips=[0, 1, 0],
            scout_show_tokens=[True, False, True],
            scores=[3, -1, 0],
            current_seat=2,
            history=[
                game_pb2.PublicAction(
                    seat=0,
                    kind=game_pb2.ACTION_KIND_SHOW,
                    cards=[c(face=5, other=9), c(face=5, other=2)],
                    start=2,
                    length=2,
                ),
                game_pb2.PublicAction(
                    seat=1,
                    kind=game_pb2.ACTION_KIND_SCOUT,
                    cards=[c(face=6, other=1)],
                    end=game_pb2.END_RIGHT,
                    insert_at=3,
                    by_referee=True,
                ),
                game_pb2.PublicAction(
                    seat=1,
                    kind=game_pb2.ACTION_KIND_SCOUT_AND_SHOW,
                    cards=[c(face=6, other=1), c(face=7, other=2)],
                    start=0,
                    length=1,
                    end=game_pb2.END_LEFT,
                    insert_at=0,
                ),
            ],
        ),
        legal_shows=[game_pb2.Show(start=0, length=1), game_pb2.Show(start=0, length=2)],
        legal_scouts=[game_pb2.Scout(end=game_pb2.END_LEFT, flip=True, insert_at=2)],
        scout_and_show_available=True,
        deadline_ms=1000,
        time_bank_ms=9000,
    )


def test_decision_request_round_trips_through_observation() -> None:
    request = full_decision_request()
    obs = convert.decision_request_from_proto(request)
    assert obs.hand_faces() == (3, 4)
    assert obs.active_faces() == (5, 5)
    assert obs.active_owner == 0
    assert obs.legal_shows == (Show(0, 1), Show(0, 2))
    assert obs.legal_scouts == (Scout(LEFT, True, 2),)
    assert (obs.request_id, obs.deadline_ms, obs.time_bank_ms) == (42, 1000, 9000)
    show, scout, both = obs.history
    assert (show.kind, show.start, show.length, show.end, show.insert_at) == (
        ActionKind.SHOW,
        2,
        2,
        None,
        None,
    )
    assert (scout.kind, scout.start, scout.end, scout.insert_at, scout.by_referee) == (
        ActionKind.SCOUT,
        None,
        RIGHT,
        3,
        True,
    )
    assert scout.scouted_card == Card(6, 1) and scout.shown_cards == ()
    assert both.scouted_card == Card(6, 1) and both.shown_cards == (Card(7, 2),)
    assert testing.decision_request_to_proto(obs) == request

    request.observation.ClearField("active_owner")
    request.observation.ClearField("active_set")
    clear = convert.decision_request_from_proto(request)
    assert clear.active_owner is None and clear.table_clear()
    assert testing.decision_request_to_proto(clear) == request


def test_scout_without_an_end_is_refused() -> None:
    with pytest.raises(ValueError, match="end"):
        convert.scout_from_proto(game_pb2.Scout(end=game_pb2.END_UNSPECIFIED))
    empty = arena_pb2.BotMessage(action=arena_pb2.ActionChoice(match_id="m", request_id=1))
    assert testing.bot_message_from_proto(empty) == ActionChoice("m", 1, None)
    assert testing.bot_message_from_proto(arena_pb2.BotMessage()) is None
    assert convert.referee_message_from_proto(arena_pb2.RefereeMessage()) is None


REFEREE_MESSAGES: list[RefereeMessage] = [
    Welcome(1, "greedy", "s-1", resumed=True),
    MatchStart(
        "m1",
        1,
        ("a", "b", "c"),
        3,
        3,
        TimeControl(1000, 10000),
        resumed=True,
        time_bank_ms=800,
        strikes=2,
    ),
    RotationRequest("m1", 5, 2, cards(1, 2, 3), deadline_ms=1000, time_bank_ms=500),
    observation(cards(1, 2, 2), cards(2), request_id=9),
    AnswerResult("m1", 9, AnswerStatus.ILLEGAL, "a 2-card run 4-5 does not beat 3-3", 1, 700),
    PublicEvent("m1", 0, PublicAction(0, ActionKind.SCOUT, cards(4), end=RIGHT, insert_at=1)),
    RoundEnded(
        "m1",
        1,
        RoundEndReason.UNBEATEN_SHOW,
        exempt_seat=2,
        round_scores=(1, -2, 3),
        totals=(4, 0, 3),
        hands=(cards(1), (), cards(2, 3)),
        dealt_hands=(cards(1, 2), cards(3), cards(4)),
        rotations=(True, False, False),
    ),
    RoundEnded("m1", 0, RoundEndReason.HAND_EMPTIED),
    MatchEnded("m1", (4, 0, 3), (1, 3, 2), (1,), "m1"),
    ProtocolError(ErrorCode.EXPECTED_HELLO, "send Hello first"),
]


BOT_MESSAGES: list[BotMessage] = [
    Hello("b", "v1", 1, 4),
    RotationChoice("m1", 3, True),
    ActionChoice("m1", 4, Show(1, 2)),
    ActionChoice("m1", 4, Scout(RIGHT, True, 0)),
    ActionChoice("m1", 4, ScoutAndShow(Scout(LEFT, False, 3), Show(2, 3))),
]


@pytest.mark.parametrize("message", REFEREE_MESSAGES, ids=lambda m: type(m).__name__)
def test_referee_messages_round_trip(message: RefereeMessage) -> None:
    wire = testing.referee_message_to_proto(message)
    again = convert.referee_message_from_proto(
        arena_pb2.RefereeMessage.FromString(wire.SerializeToString())
    )
    assert again == message


@pytest.mark.parametrize("message", BOT_MESSAGES, ids=repr)
def test_bot_messages_round_trip(message: BotMessage) -> None:
    wire = convert.bot_message_to_proto(message)
    assert (
        testing.bot_message_from_proto(arena_pb2.BotMessage.FromString(wire.SerializeToString()))
        == message
    )


def test_round_ended_without_exempt_seat_has_no_field_on_the_wire() -> None:
    wire = testing.round_ended_to_proto(RoundEnded("m", 0, RoundEndReason.NO_LEGAL_MOVE))
    assert not wire.HasField("exempt_seat")


def test_rotation_helpers() -> None:
    request = RotationRequest("m", 1, 0, (Card(1, 5), Card(2, 6), Card(3, 7)))
    assert request.hand_faces() == (1, 2, 3)
    assert request.rotated_hand() == (Card(7, 3), Card(6, 2), Card(5, 1))
    assert request.rotated_faces() == (7, 6, 5)
