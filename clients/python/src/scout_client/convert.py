"""The one translation between protobuf messages and the SDK's types, in both directions.

Everything else in the SDK works on `scout_client.types`; keeping the wire format behind this
module means a proto change touches one file, and bots (and test referees) never see a
protobuf message. Directions: `*_from_proto` reads what came off the wire, `*_to_proto` builds
what goes on it. The two whole-message functions, `referee_message_from_proto` and
`bot_message_to_proto`, are what the runner uses; their mirrors serve fake referees in tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from scout.v1 import arena_pb2, game_pb2

from .types import (
    Action,
    ActionChoice,
    ActionKind,
    AnswerResult,
    AnswerStatus,
    BotMessage,
    Card,
    End,
    ErrorCode,
    Hello,
    MatchEnded,
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
    Scout,
    ScoutAndShow,
    Show,
    TimeControl,
    Welcome,
)

__all__ = [
    "action_from_proto",
    "action_to_proto",
    "answer_result_from_proto",
    "answer_result_to_proto",
    "bot_message_from_proto",
    "bot_message_to_proto",
    "card_from_proto",
    "card_to_proto",
    "decision_request_from_proto",
    "decision_request_to_proto",
    "match_ended_from_proto",
    "match_ended_to_proto",
    "match_start_from_proto",
    "match_start_to_proto",
    "public_action_from_proto",
    "public_action_to_proto",
    "public_event_from_proto",
    "public_event_to_proto",
    "referee_message_from_proto",
    "referee_message_to_proto",
    "rotation_request_from_proto",
    "rotation_request_to_proto",
    "round_ended_from_proto",
    "round_ended_to_proto",
    "scout_from_proto",
    "scout_to_proto",
    "show_from_proto",
    "show_to_proto",
]

_K = TypeVar("_K")
_V = TypeVar("_V")


def _inverse(mapping: dict[_K, _V]) -> dict[_V, _K]:
    return {value: key for key, value in mapping.items()}


_END_TO_PROTO: dict[End, game_pb2.End.ValueType] = {
    End.LEFT: game_pb2.END_LEFT,
    End.RIGHT: game_pb2.END_RIGHT,
}
_END_FROM_PROTO = _inverse(_END_TO_PROTO)

_KIND_TO_PROTO: dict[ActionKind, game_pb2.ActionKind.ValueType] = {
    ActionKind.UNSPECIFIED: game_pb2.ACTION_KIND_UNSPECIFIED,
    ActionKind.SHOW: game_pb2.ACTION_KIND_SHOW,
    ActionKind.SCOUT: game_pb2.ACTION_KIND_SCOUT,
    ActionKind.SCOUT_AND_SHOW: game_pb2.ACTION_KIND_SCOUT_AND_SHOW,
}
_KIND_FROM_PROTO = _inverse(_KIND_TO_PROTO)

_REASON_TO_PROTO: dict[RoundEndReason, game_pb2.RoundEndReason.ValueType] = {
    RoundEndReason.UNSPECIFIED: game_pb2.ROUND_END_REASON_UNSPECIFIED,
    RoundEndReason.HAND_EMPTIED: game_pb2.ROUND_END_REASON_HAND_EMPTIED,
    RoundEndReason.UNBEATEN_SHOW: game_pb2.ROUND_END_REASON_UNBEATEN_SHOW,
    RoundEndReason.NO_LEGAL_MOVE: game_pb2.ROUND_END_REASON_NO_LEGAL_MOVE,
    RoundEndReason.ACTION_LIMIT: game_pb2.ROUND_END_REASON_ACTION_LIMIT,
}
_REASON_FROM_PROTO = _inverse(_REASON_TO_PROTO)

_STATUS_TO_PROTO: dict[AnswerStatus, arena_pb2.AnswerStatus.ValueType] = {
    AnswerStatus.UNSPECIFIED: arena_pb2.ANSWER_STATUS_UNSPECIFIED,
    AnswerStatus.ACCEPTED: arena_pb2.ANSWER_STATUS_ACCEPTED,
    AnswerStatus.ILLEGAL: arena_pb2.ANSWER_STATUS_ILLEGAL,
    AnswerStatus.MALFORMED: arena_pb2.ANSWER_STATUS_MALFORMED,
    AnswerStatus.STALE: arena_pb2.ANSWER_STATUS_STALE,
    AnswerStatus.UNKNOWN_MATCH: arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH,
    AnswerStatus.TIMED_OUT: arena_pb2.ANSWER_STATUS_TIMED_OUT,
}
_STATUS_FROM_PROTO = _inverse(_STATUS_TO_PROTO)

_ERROR_TO_PROTO: dict[ErrorCode, arena_pb2.ErrorCode.ValueType] = {
    ErrorCode.UNSPECIFIED: arena_pb2.ERROR_CODE_UNSPECIFIED,
    ErrorCode.EXPECTED_HELLO: arena_pb2.ERROR_CODE_EXPECTED_HELLO,
    ErrorCode.UNSUPPORTED_PROTOCOL: arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL,
    ErrorCode.BAD_MESSAGE: arena_pb2.ERROR_CODE_BAD_MESSAGE,
    ErrorCode.RATE_LIMITED: arena_pb2.ERROR_CODE_RATE_LIMITED,
}
_ERROR_FROM_PROTO = _inverse(_ERROR_TO_PROTO)


# --- cards and actions -------------------------------------------------------------------------


def card_from_proto(card: game_pb2.Card) -> Card:
    return Card(card.face, card.other)


def card_to_proto(card: Card) -> game_pb2.Card:
    return game_pb2.Card(face=card.face, other=card.other)


def _cards_from_proto(cards: Iterable[game_pb2.Card]) -> tuple[Card, ...]:
    return tuple(card_from_proto(card) for card in cards)


def _cards_to_proto(cards: Iterable[Card]) -> list[game_pb2.Card]:
    return [card_to_proto(card) for card in cards]


def _end_from_proto(end: game_pb2.End.ValueType) -> End | None:
    """None for END_UNSPECIFIED (or a value this SDK does not know)."""
    return _END_FROM_PROTO.get(end)


def _end_to_proto(end: End | None) -> game_pb2.End.ValueType:
    return game_pb2.END_UNSPECIFIED if end is None else _END_TO_PROTO[end]


def show_from_proto(show: game_pb2.Show) -> Show:
    return Show(show.start, show.length)


def show_to_proto(show: Show) -> game_pb2.Show:
    return game_pb2.Show(start=show.start, length=show.length)


def scout_from_proto(scout: game_pb2.Scout) -> Scout:
    """Raises ValueError for a Scout without an end, which no referee sends and which a referee
    reading a bot's answer must judge malformed."""
    end = _end_from_proto(scout.end)
    if end is None:
        raise ValueError("a Scout needs an end (END_LEFT or END_RIGHT)")
    return Scout(end, scout.flip, scout.insert_at)


def scout_to_proto(scout: Scout) -> game_pb2.Scout:
    return game_pb2.Scout(end=_END_TO_PROTO[scout.end], flip=scout.flip, insert_at=scout.insert_at)


def action_from_proto(action: game_pb2.Action) -> Action | None:
    """None when the message carries no action. Raises ValueError for a Scout without an end."""
    kind = action.WhichOneof("kind")
    if kind == "show":
        return show_from_proto(action.show)
    if kind == "scout":
        return scout_from_proto(action.scout)
    if kind == "scout_and_show":
        both = action.scout_and_show
        return ScoutAndShow(scout_from_proto(both.scout), show_from_proto(both.show))
    return None


def action_to_proto(action: Action) -> game_pb2.Action:
    if isinstance(action, Show):
        return game_pb2.Action(show=show_to_proto(action))
    if isinstance(action, Scout):
        return game_pb2.Action(scout=scout_to_proto(action))
    return game_pb2.Action(
        scout_and_show=game_pb2.ScoutAndShow(
            scout=scout_to_proto(action.scout), show=show_to_proto(action.show)
        )
    )


_SHOWS = (ActionKind.SHOW, ActionKind.SCOUT_AND_SHOW)
_SCOUTS = (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW)


def public_action_from_proto(action: game_pb2.PublicAction) -> PublicAction:
    """Fields that do not apply to the action's kind become None (the wire carries zeros)."""
    kind = _KIND_FROM_PROTO.get(action.kind, ActionKind.UNSPECIFIED)
    shows = kind in _SHOWS or kind is ActionKind.UNSPECIFIED
    scouts = kind in _SCOUTS or kind is ActionKind.UNSPECIFIED
    return PublicAction(
        seat=action.seat,
        kind=kind,
        cards=_cards_from_proto(action.cards),
        start=action.start if shows else None,
        length=action.length if shows else None,
        end=_end_from_proto(action.end) if scouts else None,
        insert_at=action.insert_at if scouts else None,
        by_referee=action.by_referee,
    )


def public_action_to_proto(action: PublicAction) -> game_pb2.PublicAction:
    return game_pb2.PublicAction(
        seat=action.seat,
        kind=_KIND_TO_PROTO[action.kind],
        cards=_cards_to_proto(action.cards),
        start=action.start or 0,
        length=action.length or 0,
        end=_end_to_proto(action.end),
        insert_at=action.insert_at or 0,
        by_referee=action.by_referee,
    )


def _time_control_from_proto(time_control: game_pb2.TimeControl) -> TimeControl:
    return TimeControl(time_control.decision_ms, time_control.time_bank_ms)


def _time_control_to_proto(time_control: TimeControl) -> game_pb2.TimeControl:
    return game_pb2.TimeControl(
        decision_ms=time_control.decision_ms, time_bank_ms=time_control.time_bank_ms
    )


# --- referee messages ---------------------------------------------------------------------------


def decision_request_from_proto(request: arena_pb2.DecisionRequest) -> Observation:
    """A DecisionRequest becomes one Observation: the seat's view plus the request's legal
    lists and clock, so `Bot.act` gets a single argument."""
    seen = request.observation
    return Observation(
        match_id=request.match_id or seen.match_id,
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
        history=tuple(public_action_from_proto(action) for action in seen.history),
        legal_shows=tuple(show_from_proto(show) for show in request.legal_shows),
        legal_scouts=tuple(scout_from_proto(scout) for scout in request.legal_scouts),
        scout_and_show_available=request.scout_and_show_available,
        request_id=request.request_id,
        deadline_ms=request.deadline_ms,
        time_bank_ms=request.time_bank_ms,
    )


def decision_request_to_proto(observation: Observation) -> arena_pb2.DecisionRequest:
    seen = game_pb2.Observation(
        match_id=observation.match_id,
        seat=observation.seat,
        num_players=observation.num_players,
        round_index=observation.round_index,
        num_rounds=observation.num_rounds,
        starting_seat=observation.starting_seat,
        hand=_cards_to_proto(observation.hand),
        hand_sizes=observation.hand_sizes,
        active_set=_cards_to_proto(observation.active_set),
        active_owner=observation.active_owner,
        captured_counts=observation.captured_counts,
        scout_chips=observation.scout_chips,
        scout_show_tokens=observation.scout_show_tokens,
        scores=observation.scores,
        current_seat=observation.current_seat,
        history=[public_action_to_proto(action) for action in observation.history],
    )
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


def rotation_request_from_proto(request: arena_pb2.RotationRequest) -> RotationRequest:
    return RotationRequest(
        match_id=request.match_id,
        request_id=request.request_id,
        round_index=request.round_index,
        hand=_cards_from_proto(request.hand),
        deadline_ms=request.deadline_ms,
        time_bank_ms=request.time_bank_ms,
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


def match_start_from_proto(start: arena_pb2.MatchStart) -> MatchStart:
    return MatchStart(
        match_id=start.match_id,
        seat=start.seat,
        player_names=tuple(start.player_names),
        num_players=start.num_players,
        num_rounds=start.num_rounds,
        time_control=_time_control_from_proto(start.time_control),
        resumed=start.resumed,
        time_bank_ms=start.time_bank_ms,
        strikes=start.strikes,
    )


def match_start_to_proto(start: MatchStart) -> arena_pb2.MatchStart:
    return arena_pb2.MatchStart(
        match_id=start.match_id,
        seat=start.seat,
        player_names=start.player_names,
        num_players=start.num_players,
        num_rounds=start.num_rounds,
        time_control=_time_control_to_proto(start.time_control),
        resumed=start.resumed,
        time_bank_ms=start.time_bank_ms,
        strikes=start.strikes,
    )


def answer_result_from_proto(result: arena_pb2.AnswerResult) -> AnswerResult:
    return AnswerResult(
        match_id=result.match_id,
        request_id=result.request_id,
        status=_STATUS_FROM_PROTO.get(result.status, AnswerStatus.UNSPECIFIED),
        reason=result.reason,
        strikes=result.strikes,
        time_bank_ms=result.time_bank_ms,
    )


def answer_result_to_proto(result: AnswerResult) -> arena_pb2.AnswerResult:
    return arena_pb2.AnswerResult(
        match_id=result.match_id,
        request_id=result.request_id,
        status=_STATUS_TO_PROTO[result.status],
        reason=result.reason,
        strikes=result.strikes,
        time_bank_ms=result.time_bank_ms,
    )


def public_event_from_proto(event: arena_pb2.PublicEvent) -> PublicEvent:
    return PublicEvent(
        match_id=event.match_id,
        round_index=event.round_index,
        action=public_action_from_proto(event.action),
    )


def public_event_to_proto(event: PublicEvent) -> arena_pb2.PublicEvent:
    return arena_pb2.PublicEvent(
        match_id=event.match_id,
        round_index=event.round_index,
        action=public_action_to_proto(event.action),
    )


def round_ended_from_proto(ended: arena_pb2.RoundEnded) -> RoundEnded:
    return RoundEnded(
        match_id=ended.match_id,
        round_index=ended.round_index,
        reason=_REASON_FROM_PROTO.get(ended.reason, RoundEndReason.UNSPECIFIED),
        exempt_seat=ended.exempt_seat if ended.HasField("exempt_seat") else None,
        round_scores=tuple(ended.round_scores),
        totals=tuple(ended.totals),
        hands=tuple(_cards_from_proto(hand.cards) for hand in ended.hands),
        dealt_hands=tuple(_cards_from_proto(hand.cards) for hand in ended.dealt_hands),
        rotations=tuple(ended.rotations),
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


def match_ended_from_proto(ended: arena_pb2.MatchEnded) -> MatchEnded:
    return MatchEnded(
        match_id=ended.match_id,
        totals=tuple(ended.totals),
        ranks=tuple(ended.ranks),
        forfeited_seats=tuple(ended.forfeited_seats),
        record_id=ended.record_id,
    )


def match_ended_to_proto(ended: MatchEnded) -> arena_pb2.MatchEnded:
    return arena_pb2.MatchEnded(
        match_id=ended.match_id,
        totals=ended.totals,
        ranks=ended.ranks,
        forfeited_seats=ended.forfeited_seats,
        record_id=ended.record_id,
    )


def referee_message_from_proto(message: arena_pb2.RefereeMessage) -> RefereeMessage | None:
    """The typed body of a referee message, or None when it has none this SDK knows."""
    body = message.WhichOneof("body")
    if body == "welcome":
        w = message.welcome
        return Welcome(w.protocol_version, w.bot_name, w.session_id, w.resumed)
    if body == "match_start":
        return match_start_from_proto(message.match_start)
    if body == "rotation_request":
        return rotation_request_from_proto(message.rotation_request)
    if body == "decision_request":
        return decision_request_from_proto(message.decision_request)
    if body == "answer_result":
        return answer_result_from_proto(message.answer_result)
    if body == "public_event":
        return public_event_from_proto(message.public_event)
    if body == "round_ended":
        return round_ended_from_proto(message.round_ended)
    if body == "match_ended":
        return match_ended_from_proto(message.match_ended)
    if body == "error":
        code = _ERROR_FROM_PROTO.get(message.error.code, ErrorCode.UNSPECIFIED)
        return ProtocolError(code, message.error.message)
    return None


def referee_message_to_proto(message: RefereeMessage) -> arena_pb2.RefereeMessage:
    """Wraps a typed referee message for the wire (used by fake referees in tests)."""
    if isinstance(message, Welcome):
        return arena_pb2.RefereeMessage(
            welcome=arena_pb2.Welcome(
                protocol_version=message.protocol_version,
                bot_name=message.bot_name,
                session_id=message.session_id,
                resumed=message.resumed,
            )
        )
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
    return arena_pb2.RefereeMessage(
        error=arena_pb2.ProtocolError(code=_ERROR_TO_PROTO[message.code], message=message.message)
    )


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
                accepts_batches=True,
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


def bot_message_from_proto(message: arena_pb2.BotMessage) -> BotMessage | None:
    """The typed body of a bot message, or None when it has none (used by fake referees in
    tests). Raises ValueError for a Scout without an end."""
    body = message.WhichOneof("body")
    if body == "hello":
        h = message.hello
        return Hello(h.bot_name, h.bot_version, h.protocol_version, h.max_concurrent_matches)
    if body == "rotation":
        r = message.rotation
        return RotationChoice(r.match_id, r.request_id, r.rotate)
    if body == "action":
        a = message.action
        action = action_from_proto(a.action) if a.HasField("action") else None
        return ActionChoice(a.match_id, a.request_id, action)
    return None
