"""Helpers for testing bots against a fake referee; not used by the SDK at run time.

A fake referee in a test speaks the protocol from the referee's side: it encodes the SDK's
message types into the protobuf a real referee would send (`referee_message_to_proto` and the
`*_to_proto` functions for each message) and decodes what the bot sends back
(`bot_message_from_proto`). These are the mirrors of `convert`, so a test can write its script
in the SDK's types and round-trip every message through the wire format. Cards, actions and
the protocol's plain values are written by `scout_codec`, as the real referee writes them.
"""

from __future__ import annotations

from collections.abc import Iterable

from scout.v1 import arena_pb2, game_pb2
from scout_codec import action_from_proto as _action_from_proto
from scout_codec import (
    answer_result_to_proto,
    assignment_to_proto,
    card_to_proto,
    goodbye_to_proto,
    inverse,
    match_ended_to_proto,
    observation_to_proto,
    probation_to_proto,
    scout_to_proto,
    show_to_proto,
    time_control_to_proto,
    welcome_to_proto,
)
from scout_codec import cards_to_proto as _cards_to_proto
from scout_codec import public_action_to_proto as _public_action_to_proto

from .convert import ERROR_FROM_PROTO, REASON_FROM_PROTO
from .types import (
    Action,
    ActionChoice,
    AnswerResult,
    Assignment,
    BotMessage,
    Goodbye,
    Hello,
    MatchEnded,
    MatchStart,
    Observation,
    Probation,
    PublicAction,
    PublicEvent,
    RefereeMessage,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    Welcome,
)

__all__ = [
    "action_from_proto",
    "answer_result_to_proto",
    "bot_message_from_proto",
    "bot_messages_from_proto",
    "referee_bundle_to_proto",
    "card_to_proto",
    "decision_request_to_proto",
    "goodbye_to_proto",
    "match_ended_to_proto",
    "match_start_to_proto",
    "public_action_to_proto",
    "public_event_to_proto",
    "referee_message_to_proto",
    "rotation_request_to_proto",
    "round_ended_to_proto",
]

_REASON_TO_PROTO = inverse(REASON_FROM_PROTO)
_ERROR_TO_PROTO = inverse(ERROR_FROM_PROTO)


# --- cards and actions -------------------------------------------------------------------------


def public_action_to_proto(action: PublicAction) -> game_pb2.PublicAction:
    """With the action's own ``by_referee`` (a script says which actions were fallbacks)."""
    return _public_action_to_proto(action, action.by_referee)


# --- what a referee sends ----------------------------------------------------------------------


def decision_request_to_proto(observation: Observation) -> arena_pb2.DecisionRequest:
    history = [public_action_to_proto(action) for action in observation.history]
    seen = observation_to_proto(observation, observation.match_id, history)
    return arena_pb2.DecisionRequest(
        match_id=observation.match_id,
        request_id=observation.request_id,
        observation=seen,
        legal_shows=[show_to_proto(show) for show in observation.legal_shows],
        legal_scouts=[scout_to_proto(scout) for scout in observation.legal_scouts],
        scout_and_show_available=observation.scout_and_show_available,
        deadline_ms=observation.deadline_ms,
        time_bank_ms=observation.time_bank_ms,
    )


def rotation_request_to_proto(request: RotationRequest) -> arena_pb2.RotationRequest:
    return arena_pb2.RotationRequest(
        match_id=request.match_id,
        request_id=request.request_id,
        round_index=request.round_index,
        hand=_cards_to_proto(request.hand),
        deadline_ms=request.deadline_ms,
        time_bank_ms=request.time_bank_ms,
    )


def match_start_to_proto(start: MatchStart) -> arena_pb2.MatchStart:
    return arena_pb2.MatchStart(
        match_id=start.match_id,
        seat=start.seat,
        player_names=start.player_names,
        num_players=start.num_players,
        num_rounds=start.num_rounds,
        time_control=time_control_to_proto(start.time_control),
        resumed=start.resumed,
        time_bank_ms=start.time_bank_ms,
        strikes=start.strikes,
    )


def public_event_to_proto(event: PublicEvent) -> arena_pb2.PublicEvent:
    return arena_pb2.PublicEvent(
        match_id=event.match_id,
        round_index=event.round_index,
        action=public_action_to_proto(event.action),
    )


def round_ended_to_proto(ended: RoundEnded) -> arena_pb2.RoundEnded:
    return arena_pb2.RoundEnded(
        match_id=ended.match_id,
        round_index=ended.round_index,
        reason=_REASON_TO_PROTO[ended.reason],
        exempt_seat=ended.exempt_seat,
        round_scores=ended.round_scores,
        totals=ended.totals,
        hands=[game_pb2.Hand(cards=_cards_to_proto(hand)) for hand in ended.hands],
        dealt_hands=[game_pb2.Hand(cards=_cards_to_proto(hand)) for hand in ended.dealt_hands],
        rotations=ended.rotations,
    )


def referee_message_to_proto(message: RefereeMessage) -> arena_pb2.RefereeMessage:
    """Wraps a typed referee message for the wire."""
    if isinstance(message, Welcome):
        return arena_pb2.RefereeMessage(welcome=welcome_to_proto(message))
    if isinstance(message, MatchStart):
        return arena_pb2.RefereeMessage(match_start=match_start_to_proto(message))
    if isinstance(message, RotationRequest):
        return arena_pb2.RefereeMessage(rotation_request=rotation_request_to_proto(message))
    if isinstance(message, Observation):
        return arena_pb2.RefereeMessage(decision_request=decision_request_to_proto(message))
    if isinstance(message, AnswerResult):
        return arena_pb2.RefereeMessage(answer_result=answer_result_to_proto(message))
    if isinstance(message, PublicEvent):
        return arena_pb2.RefereeMessage(public_event=public_event_to_proto(message))
    if isinstance(message, RoundEnded):
        return arena_pb2.RefereeMessage(round_ended=round_ended_to_proto(message))
    if isinstance(message, MatchEnded):
        return arena_pb2.RefereeMessage(match_ended=match_ended_to_proto(message))
    if isinstance(message, Goodbye):
        return arena_pb2.RefereeMessage(goodbye=goodbye_to_proto(message))
    if isinstance(message, Assignment):
        return arena_pb2.RefereeMessage(assignment=assignment_to_proto(message))
    if isinstance(message, Probation):
        return arena_pb2.RefereeMessage(probation=probation_to_proto(message))
    return arena_pb2.RefereeMessage(
        error=arena_pb2.ProtocolError(code=_ERROR_TO_PROTO[message.code], message=message.message)
    )


# --- what a referee reads ----------------------------------------------------------------------


def action_from_proto(action: game_pb2.Action) -> Action | None:
    """None when the message carries no action. Raises ValueError (`MalformedAction`) for one
    the referee would judge malformed: a Scout without an end, a Scout & Show missing a part."""
    if action.WhichOneof("kind") is None:
        return None
    return _action_from_proto(action)


def bot_message_from_proto(message: arena_pb2.BotMessage) -> BotMessage | None:
    """The typed body of a bot message, or None when it has none. Raises ValueError for a
    Scout without an end, which a referee judges malformed."""
    body = message.WhichOneof("body")
    if body == "hello":
        h = message.hello
        return Hello(h.bot_name, h.bot_version, h.protocol_version, h.max_concurrent_matches,
                     h.lean, h.accepts_bundles)
    if body == "rotation":
        r = message.rotation
        return RotationChoice(r.match_id, r.request_id, r.rotate)
    if body == "action":
        a = message.action
        action = action_from_proto(a.action) if a.HasField("action") else None
        return ActionChoice(a.match_id, a.request_id, action)
    return None


def bot_messages_from_proto(message: arena_pb2.BotMessage) -> list[BotMessage | None]:
    """What a bot's message carries, in order: its one body, or every message of a BotBundle
    (`bot_message_from_proto` of each)."""
    if message.WhichOneof("body") != "bundle":
        return [bot_message_from_proto(message)]
    return [bot_message_from_proto(inner) for inner in message.bundle.messages]


def referee_bundle_to_proto(messages: Iterable[RefereeMessage]) -> arena_pb2.RefereeMessage:
    """A RefereeBundle of ``messages`` in order, as a referee sends to a stream whose Hello
    set accepts_bundles (PROTOCOL.md §3.6.2)."""
    return arena_pb2.RefereeMessage(bundle=arena_pb2.RefereeBundle(
        messages=[referee_message_to_proto(message) for message in messages]))
