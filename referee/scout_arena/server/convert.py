"""The one place where protobuf messages and engine values meet.

Everything else in the referee speaks engine types (`Action`, `Observation`, `RoundResult`);
this module builds outgoing messages and reads incoming actions, turning anything unreadable into
`MalformedAction` with a message a bot author can act on.
"""

from __future__ import annotations

from collections.abc import Sequence

from scout.v1 import arena_pb2, game_pb2, matches_pb2

from ..engine import (
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

_END_TO_PB = {End.LEFT: game_pb2.END_LEFT, End.RIGHT: game_pb2.END_RIGHT}
_END_FROM_PB = {game_pb2.END_LEFT: End.LEFT, game_pb2.END_RIGHT: End.RIGHT}
_KIND_TO_PB = {
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
_CARD_PB = {(a, b): game_pb2.Card(face=a, other=b)
            for a in range(1, 11) for b in range(1, 11) if a != b}
_SCOUTS_PB: dict[tuple[int, int], list[game_pb2.Scout]] = {}


def cards_to_pb(cards: Sequence[Card]) -> list[game_pb2.Card]:
    table = _CARD_PB
    return [table.get(c) or game_pb2.Card(face=c.face, other=c.other) for c in cards]


def legal_scouts_to_pb(obs: Observation) -> list[game_pb2.Scout]:
    """The legal Scouts depend only on the hand size and the active set's size (when scouting
    is allowed at all), so their messages are built once per shape."""
    scouts = obs.legal_scouts()
    if not scouts:
        return []
    key = (len(obs.hand), len(obs.active_set))
    cached = _SCOUTS_PB.get(key)
    if cached is None:
        cached = _SCOUTS_PB[key] = [scout_to_pb(s) for s in scouts]
    return cached


def show_to_pb(show: Show) -> game_pb2.Show:
    return game_pb2.Show(start=show.start, length=show.length)


def scout_to_pb(scout: Scout) -> game_pb2.Scout:
    return game_pb2.Scout(end=_END_TO_PB[scout.end], flip=scout.flip, insert_at=scout.insert_at)


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
    msg = game_pb2.PublicAction(seat=action.seat, kind=_KIND_TO_PB[action.kind],
                                cards=cards_to_pb(action.cards), by_referee=by_referee)
    if action.start is not None:
        msg.start = action.start
    if action.length is not None:
        msg.length = action.length
    if action.end is not None:
        msg.end = _END_TO_PB[action.end]
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


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint, for the few messages the referee assembles from bytes."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [bytes([i]) for i in range(0x80)]
_HISTORY_TAG = b"\x82\x01"  # Observation.history = 16, length-delimited
_OBSERVATION_TAG = b"\x1a"  # DecisionRequest.observation = 3
_DECISION_REQUEST_TAG = b"\x22"  # RefereeMessage.decision_request = 4


def history_entry_bytes(action: game_pb2.PublicAction) -> bytes:
    """One serialized ``Observation.history`` entry; the referee appends one per action."""
    data = action.SerializeToString()
    return _HISTORY_TAG + varint(len(data)) + data


def decision_request_bytes(obs: Observation, match_id: str, request_id: int, deadline_ms: int,
                           time_bank_ms: int, history: bytes) -> bytes:
    """The serialized RefereeMessage of `decision_request`, with the round's history spliced in
    as bytes kept since the round began: the history grows with every action and copying it
    into every request as messages was the largest cost of asking for a decision."""
    observation = observation_to_pb(obs, match_id, ()).SerializeToString() + history
    request = arena_pb2.DecisionRequest(
        match_id=match_id,
        request_id=request_id,
        legal_shows=[show_to_pb(s) for s in obs.legal_shows()],
        legal_scouts=legal_scouts_to_pb(obs),
        scout_and_show_available=obs.can_scout_and_show(),
        deadline_ms=deadline_ms,
        time_bank_ms=time_bank_ms,
    ).SerializeToString() + _OBSERVATION_TAG + varint(len(observation)) + observation
    return _DECISION_REQUEST_TAG + varint(len(request)) + request


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
    return game_pb2.TimeControl(decision_ms=decision_ms, time_bank_ms=time_bank_ms)


__all__ = ["action_from_pb", "action_to_pb", "decision_request", "matches_pb2",
           "observation_to_pb", "public_action_to_pb", "rotation_request", "round_ended"]
