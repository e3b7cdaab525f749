"""The SDK's translation between protobuf messages and its own types, in the directions a bot
needs: referee messages in (`referee_message_from_proto`), bot messages out
(`bot_message_to_proto`).

Everything else in the SDK works on `scout_client.types` (whose cards and actions are the rules
package's); keeping the wire format behind this module means a proto change touches one file,
and bots never see a protobuf message. The opposite directions, which only a referee needs, are
in `scout_client.testing` for fake referees in tests. The public enum tables map the wire to
the SDK, the direction the SDK reads (ends go both ways, for the Scouts a bot sends); `testing`
inverts them (`inverse`) rather than repeat them. Cards, actions and the protocol's plain values
(statuses, Welcome, Goodbye, MatchEnded...) are `scout_codec`'s, the mapping the referee uses
too, offered here under the SDK's names.
"""

from __future__ import annotations

from collections.abc import Sequence

from scout.v1 import arena_pb2, game_pb2
from scout_codec import (
    END_FROM_PROTO,
    END_STATUS_FROM_PROTO,
    END_TO_PROTO,
    GOODBYE_FROM_PROTO,
    KIND_FROM_PROTO,
    STATUS_FROM_PROTO,
    action_to_proto,
    answer_result_from_proto,
    assignment_from_proto,
    card_from_proto,
    goodbye_from_proto,
    inverse,
    match_ended_from_proto,
    probation_from_proto,
    public_action_from_proto,
    scout_from_proto,
    scout_to_proto,
    show_from_proto,
    show_to_proto,
    time_control_from_proto,
    welcome_from_proto,
)
from scout_codec import cards_from_proto as _cards_from_proto

from .types import (
    BotMessage,
    ErrorCode,
    Hello,
    MatchStart,
    Observation,
    ProtocolError,
    PublicAction,
    PublicEvent,
    RefereeMessage,
    RotationChoice,
    RotationRequest,
    RoundEnded,
    RoundEndReason,
)

__all__ = [
    "END_FROM_PROTO",
    "END_STATUS_FROM_PROTO",
    "END_TO_PROTO",
    "ERROR_FROM_PROTO",
    "GOODBYE_FROM_PROTO",
    "KIND_FROM_PROTO",
    "REASON_FROM_PROTO",
    "STATUS_FROM_PROTO",
    "inverse",
    "action_to_proto",
    "answer_result_from_proto",
    "bot_message_to_proto",
    "card_from_proto",
    "decision_request_from_proto",
    "goodbye_from_proto",
    "match_ended_from_proto",
    "match_start_from_proto",
    "public_action_from_proto",
    "public_event_from_proto",
    "referee_message_from_proto",
    "RoundHistories",
    "rotation_request_from_proto",
    "round_ended_from_proto",
    "scout_from_proto",
    "scout_to_proto",
    "show_from_proto",
    "show_to_proto",
]

REASON_FROM_PROTO: dict[game_pb2.RoundEndReason.ValueType, RoundEndReason] = {
    game_pb2.ROUND_END_REASON_UNSPECIFIED: RoundEndReason.UNSPECIFIED,
    game_pb2.ROUND_END_REASON_HAND_EMPTIED: RoundEndReason.HAND_EMPTIED,
    game_pb2.ROUND_END_REASON_UNBEATEN_SHOW: RoundEndReason.UNBEATEN_SHOW,
    game_pb2.ROUND_END_REASON_NO_LEGAL_MOVE: RoundEndReason.NO_LEGAL_MOVE,
    game_pb2.ROUND_END_REASON_ACTION_LIMIT: RoundEndReason.ACTION_LIMIT,
}

ERROR_FROM_PROTO: dict[arena_pb2.ErrorCode.ValueType, ErrorCode] = {
    arena_pb2.ERROR_CODE_UNSPECIFIED: ErrorCode.UNSPECIFIED,
    arena_pb2.ERROR_CODE_EXPECTED_HELLO: ErrorCode.EXPECTED_HELLO,
    arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL: ErrorCode.UNSUPPORTED_PROTOCOL,
    arena_pb2.ERROR_CODE_BAD_MESSAGE: ErrorCode.BAD_MESSAGE,
    arena_pb2.ERROR_CODE_RATE_LIMITED: ErrorCode.RATE_LIMITED,
}


# --- referee messages ---------------------------------------------------------------------------


class RoundHistories:
    """The round histories already converted, by match: a request carries the whole history of
    its round, which only grows, so each action is converted once rather than at every later
    request of the round (at the end of a round that was most of a request's cost). One per
    stream; at most `MAX_MATCHES` matches are kept, the least recently asked first forgotten."""

    MAX_MATCHES = 1024

    def __init__(self) -> None:
        self._by_match: dict[str, tuple[int, list[PublicAction]]] = {}

    def convert(self, match_id: str, round_index: int,
                history: Sequence[game_pb2.PublicAction]) -> tuple[PublicAction, ...]:
        kept = self._by_match.pop(match_id, None)
        done: list[PublicAction] = []
        if kept is not None and kept[0] == round_index and len(kept[1]) <= len(history):
            done = kept[1]
            if done and not _same(done[-1], history[len(done) - 1]):
                done = []  # not the history seen before: start again
        for action in history[len(done):]:
            done.append(public_action_from_proto(action))
        self._by_match[match_id] = (round_index, done)
        if len(self._by_match) > self.MAX_MATCHES:
            del self._by_match[next(iter(self._by_match))]
        return tuple(done)

    def forget(self, match_id: str) -> None:
        self._by_match.pop(match_id, None)


def _same(done: PublicAction, action: game_pb2.PublicAction) -> bool:
    return done == public_action_from_proto(action)


def decision_request_from_proto(request: arena_pb2.DecisionRequest,
                                histories: RoundHistories | None = None) -> Observation:
    """A DecisionRequest becomes one Observation: the seat's view plus the request's legal
    lists and clock, so `Bot.act` gets a single argument. ``histories``: the stream's round
    histories converted so far (`RoundHistories`), to convert only what is new."""
    seen = request.observation
    match_id = request.match_id or seen.match_id
    history = (histories.convert(match_id, seen.round_index, seen.history)
               if histories is not None
               else tuple(public_action_from_proto(action) for action in seen.history))
    return Observation(
        match_id=match_id,
        seat=seen.seat,
        num_players=seen.num_players,
        round_index=seen.round_index,
        num_rounds=seen.num_rounds,
        starting_seat=seen.starting_seat,
        hand=_cards_from_proto(seen.hand),
        hand_sizes=tuple(seen.hand_sizes),
        active_set=_cards_from_proto(seen.active_set),
        active_owner=seen.active_owner if seen.HasField("active_owner") else None,
        captured_counts=tuple(seen.captured_counts),
        scout_chips=tuple(seen.scout_chips),
        scout_show_tokens=tuple(seen.scout_show_tokens),
        scores=tuple(seen.scores),
        current_seat=seen.current_seat,
        history=history,
        legal_shows=tuple(show_from_proto(show) for show in request.legal_shows),
        legal_scouts=tuple(scout_from_proto(scout) for scout in request.legal_scouts),
        scout_and_show_available=request.scout_and_show_available,
        request_id=request.request_id,
        deadline_ms=request.deadline_ms,
        time_bank_ms=request.time_bank_ms,
    )


def rotation_request_from_proto(request: arena_pb2.RotationRequest) -> RotationRequest:
    return RotationRequest(
        match_id=request.match_id,
        request_id=request.request_id,
        round_index=request.round_index,
        hand=_cards_from_proto(request.hand),
        deadline_ms=request.deadline_ms,
        time_bank_ms=request.time_bank_ms,
    )


def match_start_from_proto(start: arena_pb2.MatchStart) -> MatchStart:
    return MatchStart(
        match_id=start.match_id,
        seat=start.seat,
        player_names=tuple(start.player_names),
        num_players=start.num_players,
        num_rounds=start.num_rounds,
        time_control=time_control_from_proto(start.time_control),
        resumed=start.resumed,
        time_bank_ms=start.time_bank_ms,
        strikes=start.strikes,
    )


def public_event_from_proto(event: arena_pb2.PublicEvent) -> PublicEvent:
    return PublicEvent(
        match_id=event.match_id,
        round_index=event.round_index,
        action=public_action_from_proto(event.action),
    )


def round_ended_from_proto(ended: arena_pb2.RoundEnded) -> RoundEnded:
    return RoundEnded(
        match_id=ended.match_id,
        round_index=ended.round_index,
        reason=REASON_FROM_PROTO.get(ended.reason, RoundEndReason.UNSPECIFIED),
        exempt_seat=ended.exempt_seat if ended.HasField("exempt_seat") else None,
        round_scores=tuple(ended.round_scores),
        totals=tuple(ended.totals),
        hands=tuple(_cards_from_proto(hand.cards) for hand in ended.hands),
        dealt_hands=tuple(_cards_from_proto(hand.cards) for hand in ended.dealt_hands),
        rotations=tuple(ended.rotations),
    )


def referee_messages_from_proto(message: arena_pb2.RefereeMessage,
                                histories: RoundHistories | None = None
                                ) -> list[RefereeMessage | None]:
    """What a message from the referee carries, in order: its one body, or every message of a
    RefereeBundle (PROTOCOL.md §3.6.2). None in place of a body this SDK does not know (a
    bundle inside a bundle, which no referee sends, is one)."""
    if message.WhichOneof("body") != "bundle":
        return [referee_message_from_proto(message, histories)]
    return [referee_message_from_proto(inner, histories) for inner in message.bundle.messages]


def referee_message_from_proto(message: arena_pb2.RefereeMessage,
                               histories: RoundHistories | None = None
                               ) -> RefereeMessage | None:
    """The typed body of a referee message, or None when it has none this SDK knows.
    ``histories``: see `decision_request_from_proto`; a MatchEnded lets go of its match's."""
    body = message.WhichOneof("body")
    if body == "welcome":
        return welcome_from_proto(message.welcome)
    if body == "match_start":
        return match_start_from_proto(message.match_start)
    if body == "rotation_request":
        return rotation_request_from_proto(message.rotation_request)
    if body == "decision_request":
        return decision_request_from_proto(message.decision_request, histories)
    if body == "answer_result":
        return answer_result_from_proto(message.answer_result)
    if body == "public_event":
        return public_event_from_proto(message.public_event)
    if body == "round_ended":
        return round_ended_from_proto(message.round_ended)
    if body == "match_ended":
        if histories is not None:
            histories.forget(message.match_ended.match_id)
        return match_ended_from_proto(message.match_ended)
    if body == "error":
        code = ERROR_FROM_PROTO.get(message.error.code, ErrorCode.UNSPECIFIED)
        return ProtocolError(code, message.error.message)
    if body == "goodbye":
        return goodbye_from_proto(message.goodbye)
    if body == "assignment":
        return assignment_from_proto(message.assignment)
    if body == "probation":
        return probation_from_proto(message.probation)
    return None


# --- bot messages -------------------------------------------------------------------------------


def bot_message_to_proto(message: BotMessage) -> arena_pb2.BotMessage:
    """Wraps a typed bot message for the wire."""
    if isinstance(message, Hello):
        return arena_pb2.BotMessage(
            hello=arena_pb2.Hello(
                bot_name=message.bot_name,
                bot_version=message.bot_version,
                protocol_version=message.protocol_version,
                max_concurrent_matches=message.max_concurrent_matches,
                lean=message.lean,
                accepts_bundles=message.accepts_bundles,
            )
        )
    if isinstance(message, RotationChoice):
        return arena_pb2.BotMessage(
            rotation=arena_pb2.RotationChoice(
                match_id=message.match_id, request_id=message.request_id, rotate=message.rotate
            )
        )
    choice = arena_pb2.ActionChoice(match_id=message.match_id, request_id=message.request_id)
    if message.action is not None:
        choice.action.CopyFrom(action_to_proto(message.action))
    return arena_pb2.BotMessage(action=choice)


MAX_BUNDLE_MESSAGES = 1000
"""The most messages a BotBundle may hold (PROTOCOL.md §3.6.2)."""


def bot_messages_to_proto(messages: Sequence[BotMessage]) -> arena_pb2.BotMessage:
    """One message for the wire: the message itself when there is one, else a BotBundle of
    them in order (at most `MAX_BUNDLE_MESSAGES`, never a Hello: the caller's to keep)."""
    if len(messages) == 1:
        return bot_message_to_proto(messages[0])
    return arena_pb2.BotMessage(bundle=arena_pb2.BotBundle(
        messages=[bot_message_to_proto(message) for message in messages]))
