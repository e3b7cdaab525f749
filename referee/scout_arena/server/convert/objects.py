"""The object mapping between the referee's values and scout.v1 messages: the wire's spec.

Each function here builds (or reads) a message from engine types and `events`, field by field
as the .proto names them, and is what the referee sends wherever speed does not matter:
rotation requests, results, the Matches service and spectators. The fast path (`fast`) writes
the hot messages (DecisionRequests, broadcast actions) as bytes instead, and tests pin its bytes
to these functions' messages, serialized.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from scout.v1 import arena_pb2, game_pb2, matches_pb2, nodes_pb2
from scout_rules import (
    Action,
    Card,
    End,
    MalformedAction,
    Observation,
    PublicAction,
    RoundEnd,
    RoundResult,
    Scout,
    ScoutAndShow,
    Show,
)

from ..clock import TimeControl
from ..errors import InvalidTimeControl
from ..events import (
    ActionPlayed,
    AnswerResult,
    AnswerStatus,
    Assignment,
    BotEvent,
    DecisionRequested,
    Goodbye,
    GoodbyeReason,
    MatchEnded,
    MatchEndStatus,
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

END_TO_PB = {End.LEFT: game_pb2.END_LEFT, End.RIGHT: game_pb2.END_RIGHT}
_END_FROM_PB = {game_pb2.END_LEFT: End.LEFT, game_pb2.END_RIGHT: End.RIGHT}
KIND_TO_PB = {
    "show": game_pb2.ACTION_KIND_SHOW,
    "scout": game_pb2.ACTION_KIND_SCOUT,
    "scout_and_show": game_pb2.ACTION_KIND_SCOUT_AND_SHOW,
}
_REASON_TO_PB = {
    RoundEnd.HAND_EMPTIED: game_pb2.ROUND_END_REASON_HAND_EMPTIED,
    RoundEnd.UNBEATEN_SHOW: game_pb2.ROUND_END_REASON_UNBEATEN_SHOW,
    RoundEnd.NO_LEGAL_MOVE: game_pb2.ROUND_END_REASON_NO_LEGAL_MOVE,
    RoundEnd.ACTION_LIMIT: game_pb2.ROUND_END_REASON_ACTION_LIMIT,
}


# Immutable-by-convention message values, reused across requests (a repeated field copies them).
CARD_PB = {(a, b): game_pb2.Card(face=a, other=b)
           for a in range(1, 11) for b in range(1, 11) if a != b}
"""The message of every card of the deck."""
_SCOUTS_PB: BoundedCache[tuple[int, int], list[game_pb2.Scout]] = BoundedCache(1024)
"""Keyed by (hand size, active set size): a few hundred shapes in any real game (hands of at
most a few dozen cards), so the bound only guards against hand-made states."""


def cards_to_pb(cards: Sequence[Card]) -> list[game_pb2.Card]:
    table = CARD_PB
    return [table.get(c) or game_pb2.Card(face=c.face, other=c.other) for c in cards]


def legal_scouts_to_pb(obs: Observation) -> list[game_pb2.Scout]:
    """The legal Scouts depend only on the hand size and the active set's size (when scouting
    is allowed at all), so their messages are built once per shape."""
    scouts = obs.legal_scouts()
    if not scouts:
        return []
    key = (len(obs.hand), len(obs.active_set))
    cached = _SCOUTS_PB.entries.get(key)
    if cached is None:
        cached = _SCOUTS_PB.keep(key, [scout_to_pb(s) for s in scouts])
    return cached


def show_to_pb(show: Show) -> game_pb2.Show:
    return game_pb2.Show(start=show.start, length=show.length)


def scout_to_pb(scout: Scout) -> game_pb2.Scout:
    return game_pb2.Scout(end=END_TO_PB[scout.end], flip=scout.flip, insert_at=scout.insert_at)


def action_to_pb(action: Action) -> game_pb2.Action:
    if isinstance(action, Show):
        return game_pb2.Action(show=show_to_pb(action))
    if isinstance(action, Scout):
        return game_pb2.Action(scout=scout_to_pb(action))
    return game_pb2.Action(scout_and_show=game_pb2.ScoutAndShow(
        scout=scout_to_pb(action.scout), show=show_to_pb(action.show)))


def _scout_from_pb(msg: game_pb2.Scout) -> Scout:
    end = _END_FROM_PB.get(msg.end)
    if end is None:
        raise MalformedAction("a Scout must name its end: END_LEFT or END_RIGHT")
    return Scout(end, msg.flip, msg.insert_at)


def action_from_pb(msg: game_pb2.Action) -> Action:
    """The engine action of an ActionChoice's action; MalformedAction if it is not readable."""
    kind = msg.WhichOneof("kind")
    if kind == "show":
        return Show(msg.show.start, msg.show.length)
    if kind == "scout":
        return _scout_from_pb(msg.scout)
    if kind == "scout_and_show":
        both = msg.scout_and_show
        if not both.HasField("scout") or not both.HasField("show"):
            raise MalformedAction("a ScoutAndShow needs both its scout and its show part")
        return ScoutAndShow(_scout_from_pb(both.scout), Show(both.show.start, both.show.length))
    raise MalformedAction("the action is empty: set one of show, scout or scout_and_show")


def public_action_to_pb(action: PublicAction, by_referee: bool = False) -> game_pb2.PublicAction:
    msg = game_pb2.PublicAction(seat=action.seat, kind=KIND_TO_PB[action.kind],
                                cards=cards_to_pb(action.cards), by_referee=by_referee)
    if action.start is not None:
        msg.start = action.start
    if action.length is not None:
        msg.length = action.length
    if action.end is not None:
        msg.end = END_TO_PB[action.end]
    if action.insert_at is not None:
        msg.insert_at = action.insert_at
    return msg


def observation_to_pb(obs: Observation, match_id: str,
                      history: Sequence[game_pb2.PublicAction] | None = None
                      ) -> game_pb2.Observation:
    """``history``: the round's actions already converted (the referee keeps them as it
    broadcasts), so a long round does not reconvert every action at every decision."""
    msg = game_pb2.Observation(
        match_id=match_id,
        seat=obs.seat,
        num_players=obs.num_players,
        round_index=obs.round_index,
        num_rounds=obs.num_rounds,
        starting_seat=obs.starting_seat,
        hand=cards_to_pb(obs.hand),
        hand_sizes=obs.hand_sizes,
        active_set=cards_to_pb(obs.active_set),
        captured_counts=obs.captured_counts,
        scout_chips=obs.scout_chips,
        scout_show_tokens=obs.scout_show_tokens,
        scores=obs.scores,
        current_seat=obs.current_seat if obs.current_seat is not None else -1,
        history=history if history is not None else [public_action_to_pb(a)
                                                     for a in obs.history],
    )
    if obs.active_owner is not None:
        msg.active_owner = obs.active_owner
    return msg


def decision_request(obs: Observation, match_id: str, request_id: int, deadline_ms: int,
                     time_bank_ms: int,
                     history: Sequence[game_pb2.PublicAction] | None = None
                     ) -> arena_pb2.RefereeMessage:
    """A DecisionRequest with the legal Shows and Scouts ready to send back as they are."""
    return arena_pb2.RefereeMessage(decision_request=arena_pb2.DecisionRequest(
        match_id=match_id,
        request_id=request_id,
        observation=observation_to_pb(obs, match_id, history),
        legal_shows=[show_to_pb(s) for s in obs.legal_shows()],
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


def time_control_to_pb(decision_ms: int, time_bank_ms: int) -> game_pb2.TimeControl:
    return game_pb2.TimeControl(decision_ms=decision_ms, time_bank_ms=time_bank_ms,
                                no_time_bank=time_bank_ms == 0)




def time_control_from_pb(request: matches_pb2.CreateMatchRequest | nodes_pb2.AssignMatch,
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

_VERDICT_TO_PB: dict[AnswerStatus, arena_pb2.AnswerStatus.ValueType] = {
    AnswerStatus.UNSPECIFIED: arena_pb2.ANSWER_STATUS_UNSPECIFIED,
    AnswerStatus.ACCEPTED: arena_pb2.ANSWER_STATUS_ACCEPTED,
    AnswerStatus.ILLEGAL: arena_pb2.ANSWER_STATUS_ILLEGAL,
    AnswerStatus.MALFORMED: arena_pb2.ANSWER_STATUS_MALFORMED,
    AnswerStatus.STALE: arena_pb2.ANSWER_STATUS_STALE,
    AnswerStatus.UNKNOWN_MATCH: arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH,
    AnswerStatus.TIMED_OUT: arena_pb2.ANSWER_STATUS_TIMED_OUT,
}


_GOODBYE_TO_PB = {
    GoodbyeReason.UNSPECIFIED: arena_pb2.GOODBYE_REASON_UNSPECIFIED,
    GoodbyeReason.SHUTDOWN: arena_pb2.GOODBYE_REASON_SHUTDOWN,
    GoodbyeReason.FINISHED: arena_pb2.GOODBYE_REASON_FINISHED,
}


def public_event(event: ActionPlayed) -> arena_pb2.PublicEvent:
    return arena_pb2.PublicEvent(match_id=event.match_id, round_index=event.round_index,
                                 action=public_action_to_pb(event.action, event.by_referee))


def round_ended_event(event: RoundEnded) -> arena_pb2.RoundEnded:
    return round_ended(event.match_id, event.result, event.totals, event.dealt_hands,
                       event.rotations)


_END_STATUS_TO_PB: dict[MatchEndStatus, arena_pb2.MatchEndStatus.ValueType] = {
    MatchEndStatus.FINISHED: arena_pb2.MATCH_END_STATUS_FINISHED,
    MatchEndStatus.ABORTED: arena_pb2.MATCH_END_STATUS_ABORTED,
    MatchEndStatus.VOIDED: arena_pb2.MATCH_END_STATUS_VOIDED,
}


def match_ended(event: MatchEnded) -> arena_pb2.MatchEnded:
    return arena_pb2.MatchEnded(match_id=event.match_id, totals=event.totals, ranks=event.ranks,
                                forfeited_seats=event.forfeited_seats, record_id=event.record_id,
                                status=_END_STATUS_TO_PB[event.status], reason=event.reason)


def referee_message(event: BotEvent) -> arena_pb2.RefereeMessage:
    """The RefereeMessage of any event a bot is sent, built from the event alone."""
    if isinstance(event, AnswerResult):
        return arena_pb2.RefereeMessage(answer_result=arena_pb2.AnswerResult(
            match_id=event.match_id, request_id=event.request_id,
            status=_VERDICT_TO_PB[event.status], reason=event.reason, strikes=event.strikes,
            time_bank_ms=event.time_bank_ms))
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
        return arena_pb2.RefereeMessage(match_ended=match_ended(event))
    if isinstance(event, MatchStarted):
        tc = event.time_control
        return arena_pb2.RefereeMessage(match_start=arena_pb2.MatchStart(
            match_id=event.match_id, seat=event.seat, player_names=event.players,
            num_players=event.num_players, num_rounds=event.num_rounds,
            time_control=time_control_to_pb(tc.decision_ms, tc.time_bank_ms),
            resumed=event.resumed, time_bank_ms=event.time_bank_ms, strikes=event.strikes))
    if isinstance(event, Welcome):
        return arena_pb2.RefereeMessage(welcome=arena_pb2.Welcome(
            protocol_version=event.protocol_version, bot_name=event.bot_name,
            session_id=event.session_id, resumed=event.resumed))
    if isinstance(event, Assignment):
        return arena_pb2.RefereeMessage(assignment=arena_pb2.MatchAssignment(
            match_id=event.match_id, address=event.address, ticket=event.ticket,
            tls=event.tls))
    if isinstance(event, Probation):
        return arena_pb2.RefereeMessage(probation=arena_pb2.Probation(
            active=event.active, reason=event.reason,
            lifted_by_reconnect=event.lifted_by_reconnect))
    if isinstance(event, Goodbye):
        return arena_pb2.RefereeMessage(goodbye=arena_pb2.Goodbye(
            reason=_GOODBYE_TO_PB[event.reason], message=event.message,
            reconnect=event.reconnect, retry_after_ms=event.retry_after_ms))
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
        time_control=time_control_to_pb(tc.decision_ms, tc.time_bank_ms),
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
