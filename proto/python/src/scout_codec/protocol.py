"""The protocol's plain values (`scout_rules.protocol`) between the rules package and scout.v1.

A referee writes these messages and a bot reads them (and a fake referee in the SDK's tests
writes them too): one table per enum and one function per direction, so both sides agree on
every value by construction. Unknown values read as UNSPECIFIED (PROTOCOL.md §14), except a
MatchEnded's status, which reads as FINISHED.
"""

from __future__ import annotations

from scout.v1 import arena_pb2, game_pb2
from scout_rules.protocol import (
    AnswerResult,
    AnswerStatus,
    Assignment,
    Goodbye,
    GoodbyeReason,
    MatchEnded,
    MatchEndStatus,
    Probation,
    TimeControl,
    Welcome,
)

from .game import inverse

STATUS_FROM_PROTO: dict[arena_pb2.AnswerStatus.ValueType, AnswerStatus] = {
    arena_pb2.ANSWER_STATUS_UNSPECIFIED: AnswerStatus.UNSPECIFIED,
    arena_pb2.ANSWER_STATUS_ACCEPTED: AnswerStatus.ACCEPTED,
    arena_pb2.ANSWER_STATUS_ILLEGAL: AnswerStatus.ILLEGAL,
    arena_pb2.ANSWER_STATUS_MALFORMED: AnswerStatus.MALFORMED,
    arena_pb2.ANSWER_STATUS_STALE: AnswerStatus.STALE,
    arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH: AnswerStatus.UNKNOWN_MATCH,
    arena_pb2.ANSWER_STATUS_TIMED_OUT: AnswerStatus.TIMED_OUT,
}
STATUS_TO_PROTO = inverse(STATUS_FROM_PROTO)

GOODBYE_FROM_PROTO: dict[arena_pb2.GoodbyeReason.ValueType, GoodbyeReason] = {
    arena_pb2.GOODBYE_REASON_UNSPECIFIED: GoodbyeReason.UNSPECIFIED,
    arena_pb2.GOODBYE_REASON_SHUTDOWN: GoodbyeReason.SHUTDOWN,
    arena_pb2.GOODBYE_REASON_FINISHED: GoodbyeReason.FINISHED,
}
GOODBYE_TO_PROTO = inverse(GOODBYE_FROM_PROTO)

END_STATUS_FROM_PROTO: dict[arena_pb2.MatchEndStatus.ValueType, MatchEndStatus] = {
    arena_pb2.MATCH_END_STATUS_FINISHED: MatchEndStatus.FINISHED,
    arena_pb2.MATCH_END_STATUS_ABORTED: MatchEndStatus.ABORTED,
    arena_pb2.MATCH_END_STATUS_VOIDED: MatchEndStatus.VOIDED,
}
"""UNSPECIFIED (sent by a referee older than the field) reads as FINISHED, as does a value this
reader does not know."""
END_STATUS_TO_PROTO = inverse(END_STATUS_FROM_PROTO)


def answer_result_to_proto(result: AnswerResult) -> arena_pb2.AnswerResult:
    return arena_pb2.AnswerResult(
        match_id=result.match_id,
        request_id=result.request_id,
        status=STATUS_TO_PROTO[result.status],
        reason=result.reason,
        strikes=result.strikes,
        time_bank_ms=result.time_bank_ms,
    )


def answer_result_from_proto(result: arena_pb2.AnswerResult) -> AnswerResult:
    return AnswerResult(
        match_id=result.match_id,
        request_id=result.request_id,
        status=STATUS_FROM_PROTO.get(result.status, AnswerStatus.UNSPECIFIED),
        reason=result.reason,
        strikes=result.strikes,
        time_bank_ms=result.time_bank_ms,
    )


def match_ended_to_proto(ended: MatchEnded) -> arena_pb2.MatchEnded:
    return arena_pb2.MatchEnded(
        match_id=ended.match_id,
        totals=ended.totals,
        ranks=ended.ranks,
        forfeited_seats=ended.forfeited_seats,
        record_id=ended.record_id,
        status=END_STATUS_TO_PROTO[ended.status],
        reason=ended.reason,
    )


def match_ended_from_proto(ended: arena_pb2.MatchEnded) -> MatchEnded:
    return MatchEnded(
        match_id=ended.match_id,
        totals=tuple(ended.totals),
        ranks=tuple(ended.ranks),
        forfeited_seats=tuple(ended.forfeited_seats),
        record_id=ended.record_id,
        status=END_STATUS_FROM_PROTO.get(ended.status, MatchEndStatus.FINISHED),
        reason=ended.reason,
    )


def goodbye_to_proto(goodbye: Goodbye) -> arena_pb2.Goodbye:
    return arena_pb2.Goodbye(
        reason=GOODBYE_TO_PROTO[goodbye.reason],
        message=goodbye.message,
        reconnect=goodbye.reconnect,
        retry_after_ms=goodbye.retry_after_ms,
    )


def goodbye_from_proto(goodbye: arena_pb2.Goodbye) -> Goodbye:
    """A reason this reader does not know reads as UNSPECIFIED; `reconnect` alone decides what
    a bot does."""
    return Goodbye(
        reason=GOODBYE_FROM_PROTO.get(goodbye.reason, GoodbyeReason.UNSPECIFIED),
        message=goodbye.message,
        reconnect=goodbye.reconnect,
        retry_after_ms=goodbye.retry_after_ms,
    )


def welcome_to_proto(welcome: Welcome) -> arena_pb2.Welcome:
    return arena_pb2.Welcome(
        protocol_version=welcome.protocol_version,
        bot_name=welcome.bot_name,
        session_id=welcome.session_id,
        resumed=welcome.resumed,
    )


def welcome_from_proto(welcome: arena_pb2.Welcome) -> Welcome:
    return Welcome(welcome.protocol_version, welcome.bot_name, welcome.session_id, welcome.resumed)


def assignment_to_proto(assignment: Assignment) -> arena_pb2.MatchAssignment:
    return arena_pb2.MatchAssignment(
        match_id=assignment.match_id,
        address=assignment.address,
        ticket=assignment.ticket,
        tls=assignment.tls,
    )


def assignment_from_proto(assignment: arena_pb2.MatchAssignment) -> Assignment:
    return Assignment(assignment.match_id, assignment.address, assignment.ticket, assignment.tls)


def probation_to_proto(probation: Probation) -> arena_pb2.Probation:
    return arena_pb2.Probation(
        active=probation.active,
        reason=probation.reason,
        lifted_by_reconnect=probation.lifted_by_reconnect,
    )


def probation_from_proto(probation: arena_pb2.Probation) -> Probation:
    return Probation(probation.active, probation.reason, probation.lifted_by_reconnect)


def time_control_to_proto(time_control: TimeControl) -> game_pb2.TimeControl:
    """A bank of 0 is sent as ``no_time_bank`` too: a reader of a request would otherwise take
    the 0 for "the referee's default"."""
    return game_pb2.TimeControl(decision_ms=time_control.decision_ms,
                                time_bank_ms=time_control.time_bank_ms,
                                no_time_bank=time_control.time_bank_ms == 0)


def time_control_from_proto(time_control: game_pb2.TimeControl) -> TimeControl:
    """As a MatchStart states it: the match's own values, no defaults filled in."""
    return TimeControl(time_control.decision_ms, time_control.time_bank_ms)
