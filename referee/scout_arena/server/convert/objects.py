"""The object mapping between the referee's values and scout.v1 messages: the wire's spec.

Each function here builds (or reads) a message from engine types and `events`, field by field
as the .proto names them, and is what the referee sends wherever speed does not matter:
rotation requests, results, the Matches service and spectators. The fast path (`fast`) writes
the hot messages (DecisionRequests, broadcast actions) as bytes instead, and tests pin its bytes
to these functions' messages, serialized. Cards, actions and the protocol's plain values go
through `scout_codec`, the mapping the SDK uses too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from scout.v1 import arena_pb2, game_pb2, matches_pb2, nodes_pb2
from scout_codec import (
    CARD_PROTO,
    END_TO_PROTO,
    KIND_TO_PROTO,
    action_from_proto,
    action_to_proto,
    answer_result_to_proto,
    assignment_to_proto,
    cards_to_proto,
    goodbye_to_proto,
    match_ended_to_proto,
    observation_to_proto,
    probation_to_proto,
    public_action_to_proto,
    scout_to_proto,
    show_to_proto,
    time_control_to_proto,
    welcome_to_proto,
)
from scout_rules import Card, Observation, RoundEnd, RoundResult
from scout_rules.protocol import TimeControl

from ..errors import InvalidTimeControl
from ..events import (
    ActionPlayed,
    AnswerResult,
    Assignment,
    BotEvent,
    DecisionRequested,
    Goodbye,
    MatchEnded,
    MatchSnapshot,
    MatchStarted,
    MatchStatus,
    Probation,
    RotationRequested,
    RoundEnded,
    RoundStarted,
    SpectatorEvent,
    Welcome,
)
from .cache import BoundedCache

# The cards, actions and protocol values are the codec's, shared with the SDK (`scout_codec`);
# the referee's names for them stay, for its fast path and its tests.
CARD_PB = CARD_PROTO
END_TO_PB = END_TO_PROTO
KIND_TO_PB = {kind: pb for kind, pb in KIND_TO_PROTO.items() if pb}
"""The kinds an engine's action has (never UNSPECIFIED)."""
cards_to_pb = cards_to_proto
show_to_pb = show_to_proto
scout_to_pb = scout_to_proto
action_to_pb = action_to_proto
action_from_pb = action_from_proto
public_action_to_pb = public_action_to_proto
observation_to_pb = observation_to_proto

_REASON_TO_PB = {
    RoundEnd.HAND_EMPTIED: game_pb2.ROUND_END_REASON_HAND_EMPTIED,
    RoundEnd.UNBEATEN_SHOW: game_pb2.ROUND_END_REASON_UNBEATEN_SHOW,
    RoundEnd.NO_LEGAL_MOVE: game_pb2.ROUND_END_REASON_NO_LEGAL_MOVE,
    RoundEnd.ACTION_LIMIT: game_pb2.ROUND_END_REASON_ACTION_LIMIT,
}

_SCOUTS_PB: BoundedCache[tuple[int, int], list[game_pb2.Scout]] = BoundedCache(1024)
"""Keyed by (hand size, active set size): a few hundred shapes in any real game (hands of at
most a few dozen cards), so the bound only guards against hand-made states."""


def legal_scouts_to_pb(obs: Observation) -> list[game_pb2.Scout]:
    """The legal Scouts depend only on the hand size and the active set's size (when scouting
    is allowed at all), so their messages are built once per shape."""
    scouts = obs.legal_scouts()
    if not scouts:
        return []
    key = (len(obs.hand), len(obs.active_set))
    cached = _SCOUTS_PB.entries.get(key)
    if cached is None:
        cached = _SCOUTS_PB.keep(key, [scout_to_proto(s) for s in scouts])
    return cached


def decision_request(obs: Observation, match_id: str, request_id: int, deadline_ms: int,
                     time_bank_ms: int,
                     history: Sequence[game_pb2.PublicAction] | None = None
                     ) -> arena_pb2.RefereeMessage:
    """A DecisionRequest with the legal Shows and Scouts ready to send back as they are."""
    return arena_pb2.RefereeMessage(decision_request=arena_pb2.DecisionRequest(
        match_id=match_id,
        request_id=request_id,
        observation=observation_to_proto(obs, match_id, history),
        legal_shows=[show_to_proto(s) for s in obs.legal_shows()],
        legal_scouts=legal_scouts_to_pb(obs),
        scout_and_show_available=obs.can_scout_and_show(),
        deadline_ms=deadline_ms,
        time_bank_ms=time_bank_ms,
    ))


def rotation_request(match_id: str, request_id: int, round_index: int, hand: Sequence[Card],
                     deadline_ms: int, time_bank_ms: int) -> arena_pb2.RefereeMessage:
    return arena_pb2.RefereeMessage(rotation_request=arena_pb2.RotationRequest(
        match_id=match_id, request_id=request_id, round_index=round_index,
        hand=cards_to_pb(hand), deadline_ms=deadline_ms, time_bank_ms=time_bank_ms))


def round_ended(match_id: str, result: RoundResult, totals: Sequence[int],
                dealt: Sequence[Sequence[Card]], rotations: Sequence[bool | None]
                ) -> arena_pb2.RoundEnded:
    msg = arena_pb2.RoundEnded(
        match_id=match_id,
        round_index=result.round_index,
        reason=_REASON_TO_PB[result.end_reason],
        round_scores=result.scores,
        totals=totals,
        hands=[game_pb2.Hand(cards=cards_to_pb(h)) for h in result.hands],
        dealt_hands=[game_pb2.Hand(cards=cards_to_pb(h)) for h in dealt],
        rotations=[bool(r) for r in rotations],
    )
    if result.exempt_seat is not None:
        msg.exempt_seat = result.exempt_seat
    return msg






def requested_time_control(request: matches_pb2.CreateMatchRequest | nodes_pb2.AssignMatch,
                         default: TimeControl) -> TimeControl:
    """A CreateMatch's (or a ladder's AssignMatch's) time control: absent or zero fields take
    the referee's defaults, but
    ``no_time_bank`` asks for a match without a bank (and refuses a bank given with it)."""
    if not request.HasField("time_control"):
        return default
    asked = request.time_control
    if asked.no_time_bank and asked.time_bank_ms:
        raise InvalidTimeControl(f"time_bank_ms {asked.time_bank_ms} contradicts no_time_bank")
    bank = 0 if asked.no_time_bank else asked.time_bank_ms or default.time_bank_ms
    return TimeControl(asked.decision_ms or default.decision_ms, bank)


# ----- events to bots ---------------------------------------------------------------------

def public_event(event: ActionPlayed) -> arena_pb2.PublicEvent:
    return arena_pb2.PublicEvent(match_id=event.match_id, round_index=event.round_index,
                                 action=public_action_to_pb(event.action, event.by_referee))


def round_ended_event(event: RoundEnded) -> arena_pb2.RoundEnded:
    return round_ended(event.match_id, event.result, event.totals, event.dealt_hands,
                       event.rotations)


def match_ended(event: MatchEnded) -> arena_pb2.MatchEnded:
    return match_ended_to_proto(event)


def referee_message(event: BotEvent) -> arena_pb2.RefereeMessage:
    """The RefereeMessage of any event a bot is sent, built from the event alone."""
    if isinstance(event, AnswerResult):
        return arena_pb2.RefereeMessage(answer_result=answer_result_to_proto(event))
    if isinstance(event, ActionPlayed):
        return arena_pb2.RefereeMessage(public_event=public_event(event))
    if isinstance(event, DecisionRequested):
        return decision_request(event.observation, event.match_id, event.request_id,
                                event.deadline_ms, event.time_bank_ms)
    if isinstance(event, RotationRequested):
        return rotation_request(event.match_id, event.request_id, event.round_index,
                                event.hand, event.deadline_ms, event.time_bank_ms)
    if isinstance(event, RoundEnded):
        return arena_pb2.RefereeMessage(round_ended=round_ended_event(event))
    if isinstance(event, MatchEnded):
        return arena_pb2.RefereeMessage(match_ended=match_ended_to_proto(event))
    if isinstance(event, MatchStarted):
        tc = event.time_control
        return arena_pb2.RefereeMessage(match_start=arena_pb2.MatchStart(
            match_id=event.match_id, seat=event.seat, player_names=event.players,
            num_players=event.num_players, num_rounds=event.num_rounds,
            time_control=time_control_to_proto(tc),
            resumed=event.resumed, time_bank_ms=event.time_bank_ms, strikes=event.strikes))
    if isinstance(event, Welcome):
        return arena_pb2.RefereeMessage(welcome=welcome_to_proto(event))
    if isinstance(event, Assignment):
        return arena_pb2.RefereeMessage(assignment=assignment_to_proto(event))
    if isinstance(event, Probation):
        return arena_pb2.RefereeMessage(probation=probation_to_proto(event))
    if isinstance(event, Goodbye):
        return arena_pb2.RefereeMessage(goodbye=goodbye_to_proto(event))
    assert_never(event)


def encode_event(event: BotEvent) -> bytes:
    return referee_message(event).SerializeToString()


# ----- organisers and spectators ----------------------------------------------------------

_STATUS_TO_PB: dict[MatchStatus, matches_pb2.MatchStatus.ValueType] = {
    MatchStatus.RUNNING: matches_pb2.MATCH_STATUS_RUNNING,
    MatchStatus.FINISHED: matches_pb2.MATCH_STATUS_FINISHED,
    MatchStatus.ABORTED: matches_pb2.MATCH_STATUS_ABORTED,
}
_STATUS_FROM_PB = {pb: status for status, pb in _STATUS_TO_PB.items()}


def match_status_from_pb(status: matches_pb2.MatchStatus.ValueType) -> MatchStatus | None:
    """None for MATCH_STATUS_UNSPECIFIED (or a status this referee does not know): any."""
    return _STATUS_FROM_PB.get(status)


def match_info(snapshot: MatchSnapshot) -> matches_pb2.MatchInfo:
    """The one place a MatchInfo is built (CreateMatch, GetMatch, ListMatches, and the
    spectators' first and last events). The seed deals every hand of every round
    (`deal_match`), so it is told only once the match has ended: 0 while it runs."""
    tc = snapshot.time_control
    seed = 0 if snapshot.status is MatchStatus.RUNNING else snapshot.seed
    return matches_pb2.MatchInfo(
        match_id=snapshot.match_id, status=_STATUS_TO_PB[snapshot.status],
        bots=snapshot.players, seed=seed,
        time_control=time_control_to_proto(tc),
        round_index=snapshot.round_index, totals=snapshot.totals,
        ranks=snapshot.ranks, forfeited_seats=snapshot.forfeited_seats)


def spectator_event(event: SpectatorEvent) -> matches_pb2.SpectatorEvent:
    if isinstance(event, ActionPlayed):
        return matches_pb2.SpectatorEvent(public_event=public_event(event))
    if isinstance(event, RoundStarted):
        return matches_pb2.SpectatorEvent(round_started=matches_pb2.RoundStarted(
            match_id=event.match_id, round_index=event.round_index,
            starting_seat=event.starting_seat, hand_sizes=event.hand_sizes))
    if isinstance(event, RoundEnded):
        return matches_pb2.SpectatorEvent(round_ended=round_ended_event(event))
    if isinstance(event, MatchEnded):
        return matches_pb2.SpectatorEvent(match_ended=match_ended(event))
    if isinstance(event, MatchSnapshot):
        return matches_pb2.SpectatorEvent(match_info=match_info(event))
    assert_never(event)
