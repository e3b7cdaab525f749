"""The one place where protobuf messages and the referee's values meet: the wire.

Everything else in the referee speaks engine types and `events`; this module serializes the
events a match emits (`Wire`, `MatchWire`), reads bots' answers into `RotationAnswer` /
`ActionAnswer` (anything unreadable becomes a reason a bot author can act on), and builds what
the Matches service and spectators are sent. The referee's speed lives here too: a broadcast
is serialized once for the whole table, each round's history is kept serialized and spliced
into every DecisionRequest as bytes, and the messages of cards and of legal Scouts are built
once and reused.
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

from .clock import TimeControl
from .errors import InvalidTimeControl
from .events import (
    ActionAnswer,
    ActionPlayed,
    AnswerJudged,
    Assigned,
    BotEvent,
    DecisionRequested,
    Goodbye,
    GoodbyeReason,
    MatchEnded,
    MatchSnapshot,
    MatchStarted,
    MatchStatus,
    RotationAnswer,
    RotationRequested,
    RoundEnded,
    RoundStarted,
    SpectatorEvent,
    Verdict,
    Welcome,
)

PROTOCOL_VERSION = 1

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
_PUBLIC_EVENT_TAG = b"\x32"  # RefereeMessage.public_event = 6


def length_delimited(tag: bytes, data: bytes) -> bytes:
    """One serialized length-delimited field (``tag`` already holds its number and wire type):
    how the referee splices messages it has as bytes into the ones it sends."""
    size = len(data)
    return b"".join((tag, _SMALL_VARINTS[size] if size < 0x80 else varint(size), data))


def history_entry_bytes(action: game_pb2.PublicAction) -> bytes:
    """One serialized ``Observation.history`` entry; the referee appends one per action."""
    return length_delimited(_HISTORY_TAG, action.SerializeToString())


_LEGAL_SHOW_TAG = b"\x22"  # DecisionRequest.legal_shows = 4
_LEGAL_SCOUT_TAG = b"\x2a"  # DecisionRequest.legal_scouts = 5
_SHOW_ENTRIES: dict[tuple[int, int], bytes] = {}
_SCOUT_ENTRIES: dict[tuple[int, int], bytes] = {}


def _legal_shows_bytes(shows: Sequence[Show]) -> bytes:
    """The serialized ``legal_shows`` entries: each (start, length) is serialized once."""
    entries = _SHOW_ENTRIES
    parts = []
    for show in shows:
        entry = entries.get(show)
        if entry is None:
            entry = length_delimited(_LEGAL_SHOW_TAG, show_to_pb(show).SerializeToString())
            if len(entries) < 4096:
                entries[show] = entry
        parts.append(entry)
    return b"".join(parts)


def _legal_scouts_bytes(obs: Observation) -> bytes:
    """The serialized ``legal_scouts`` entries: they depend only on the hand's and the active
    set's sizes (`legal_scouts_to_pb`), so each shape is serialized once."""
    if not obs.can_scout():
        return b""
    key = (len(obs.hand), len(obs.active_set))
    entry = _SCOUT_ENTRIES.get(key)
    if entry is None:
        entry = b"".join(length_delimited(_LEGAL_SCOUT_TAG, scout.SerializeToString())
                         for scout in legal_scouts_to_pb(obs))
        if len(_SCOUT_ENTRIES) < 4096:
            _SCOUT_ENTRIES[key] = entry
    return entry


def _varint_signed(value: int) -> bytes:
    """An int32's varint: a negative one is sign-extended to ten bytes, as protobuf does."""
    return varint(value) if value >= 0 else varint(value & 0xFFFF_FFFF_FFFF_FFFF)


_FIELDS: dict[tuple[bytes, int | str | tuple[int, ...]], bytes] = {}
"""Serialized fields seen before: a match's id, its time control, most request ids and the
short tuples of counters (hand sizes, chips, scores) recur from request to request."""


def _str_field(tag: bytes, value: str) -> bytes:
    """A proto3 string field (omitted at its default, empty)."""
    key = (tag, value)
    data = _FIELDS.get(key)
    if data is None:
        data = length_delimited(tag, value.encode()) if value else b""
        _keep_field(key, data)
    return data


def _int_field(tag: bytes, value: int) -> bytes:
    """A proto3 int32 field (omitted at its default, 0)."""
    key = (tag, value)
    data = _FIELDS.get(key)
    if data is None:
        data = tag + _varint_signed(value) if value else b""
        _keep_field(key, data)
    return data


def _keep_field(key: tuple[bytes, int | str | tuple[int, ...]], data: bytes) -> None:
    if len(_FIELDS) >= 8192:  # match ids come and go: start again rather than grow
        _FIELDS.clear()
    _FIELDS[key] = data


def _packed_ints(tag: bytes, values: tuple[int, ...]) -> bytes:
    """A packed repeated int32 or bool field (omitted when empty)."""
    key = (tag, values)
    data = _FIELDS.get(key)
    if data is not None:
        return data
    if not values:
        data = b""
    else:
        if min(values) >= 0 and max(values) < 0x80:
            body = bytes(values)  # each a one-byte varint: the common case, made in C
        else:
            body = b"".join([_varint_signed(int(v)) for v in values])
        data = b"".join((tag, varint(len(body)), body))
    _keep_field(key, data)
    return data


_ACTION_CARD_TAG = b"\x1a"  # PublicAction.cards = 3
_KIND_FIELDS = {kind: b"\x10" + varint(pb) for kind, pb in _KIND_TO_PB.items()}
_END_FIELDS = {end: b"\x30" + varint(pb) for end, pb in _END_TO_PB.items()}


def public_action_bytes(action: PublicAction, by_referee: bool = False) -> bytes:
    """The serialized `public_action_to_pb`, written field by field (one per action played,
    and building the message cost more than the rest of recording it); a test pins the bytes
    to the message's."""
    start, length, end, insert_at = action.start, action.length, action.end, action.insert_at
    return b"".join((
        _int_field(b"\x08", action.seat),
        _KIND_FIELDS[action.kind],
        _card_entries(_ACTION_CARD_ENTRIES, _ACTION_CARD_TAG, action.cards),
        b"" if start is None else _int_field(b"\x20", start),
        b"" if length is None else _int_field(b"\x28", length),
        b"" if end is None else _END_FIELDS[end],
        b"" if insert_at is None else _int_field(b"\x38", insert_at),
        b"\x40\x01" if by_referee else b"",
    ))


_HAND_TAG = b"\x3a"  # Observation.hand = 7
_ACTIVE_SET_TAG = b"\x4a"  # Observation.active_set = 9
_HAND_ENTRIES = {key: length_delimited(_HAND_TAG, card.SerializeToString())
                 for key, card in _CARD_PB.items()}
_ACTIVE_ENTRIES = {key: length_delimited(_ACTIVE_SET_TAG, card.SerializeToString())
                   for key, card in _CARD_PB.items()}
_ACTION_CARD_ENTRIES = {key: length_delimited(_ACTION_CARD_TAG, card.SerializeToString())
                        for key, card in _CARD_PB.items()}
_SEAT_FIELDS: dict[tuple[int, ...], bytes] = {}


def _seat_fields(obs: Observation) -> bytes:
    """Observation fields 2-6 (the seat's place in its match and round), serialized once per
    combination: they change once a round."""
    key = (obs.seat, obs.num_players, obs.round_index, obs.num_rounds, obs.starting_seat)
    data = _SEAT_FIELDS.get(key)
    if data is None:
        data = b"".join((
            _int_field(b"\x10", obs.seat), _int_field(b"\x18", obs.num_players),
            _int_field(b"\x20", obs.round_index), _int_field(b"\x28", obs.num_rounds),
            _int_field(b"\x30", obs.starting_seat)))
        if len(_SEAT_FIELDS) < 4096:
            _SEAT_FIELDS[key] = data
    return data


def _card_entries(entries: dict[tuple[int, int], bytes], tag: bytes,
                  cards: Sequence[Card]) -> bytes:
    try:
        return b"".join(map(entries.__getitem__, cards))
    except KeyError:  # a card outside the deck: only in hand-made test states
        return b"".join(length_delimited(tag, game_pb2.Card(
            face=c.face, other=c.other).SerializeToString()) for c in cards)


def observation_bytes(obs: Observation, match_id: str) -> bytes:
    """The serialized `observation_to_pb` of ``obs`` without its history, written field by
    field: building the message (a Card message per card) cost more than all the rest of a
    DecisionRequest. Card entries and the seat's fields are serialized once; a test pins the
    bytes to the message's."""
    owner = obs.active_owner
    current = obs.current_seat
    return b"".join((
        _str_field(b"\x0a", match_id),
        _seat_fields(obs),
        _card_entries(_HAND_ENTRIES, _HAND_TAG, obs.hand),
        _packed_ints(b"\x42", obs.hand_sizes),
        _card_entries(_ACTIVE_ENTRIES, _ACTIVE_SET_TAG, obs.active_set),
        b"" if owner is None else b"\x50" + _varint_signed(owner),
        _packed_ints(b"\x5a", obs.captured_counts),
        _packed_ints(b"\x62", obs.scout_chips),
        _packed_ints(b"\x6a", obs.scout_show_tokens),
        _packed_ints(b"\x72", obs.scores),
        _int_field(b"\x78", -1 if current is None else current),
    ))


def decision_request_bytes(obs: Observation, match_id: str, request_id: int, deadline_ms: int,
                           time_bank_ms: int, history: bytes) -> bytes:
    """The serialized RefereeMessage of `decision_request`, with the round's history spliced in
    as bytes kept since the round began: the history grows with every action and copying it
    into every request as messages was the largest cost of asking for a decision. The legal
    lists are spliced in from bytes made once per Show and per shape of Scouts, and the
    observation is written field by field (`observation_bytes`)."""
    shows, can_scout_and_show = obs.shows_and_scout_and_show()
    request = b"".join((
        _str_field(b"\x0a", match_id),
        _int_field(b"\x10", request_id),
        _legal_shows_bytes(shows),
        _legal_scouts_bytes(obs),
        b"\x30\x01" if can_scout_and_show else b"",
        _int_field(b"\x38", deadline_ms),
        _int_field(b"\x40", time_bank_ms),
        length_delimited(_OBSERVATION_TAG, observation_bytes(obs, match_id) + history)))
    return length_delimited(_DECISION_REQUEST_TAG, request)


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

_VERDICT_TO_PB: dict[Verdict, arena_pb2.AnswerStatus.ValueType] = {
    Verdict.ACCEPTED: arena_pb2.ANSWER_STATUS_ACCEPTED,
    Verdict.ILLEGAL: arena_pb2.ANSWER_STATUS_ILLEGAL,
    Verdict.MALFORMED: arena_pb2.ANSWER_STATUS_MALFORMED,
    Verdict.STALE: arena_pb2.ANSWER_STATUS_STALE,
    Verdict.UNKNOWN_MATCH: arena_pb2.ANSWER_STATUS_UNKNOWN_MATCH,
    Verdict.TIMED_OUT: arena_pb2.ANSWER_STATUS_TIMED_OUT,
}


_GOODBYE_TO_PB = {
    GoodbyeReason.SHUTDOWN: arena_pb2.GOODBYE_REASON_SHUTDOWN,
    GoodbyeReason.FINISHED: arena_pb2.GOODBYE_REASON_FINISHED,
}


def public_event(event: ActionPlayed) -> arena_pb2.PublicEvent:
    return arena_pb2.PublicEvent(match_id=event.match_id, round_index=event.round_index,
                                 action=public_action_to_pb(event.action, event.by_referee))


def round_ended_event(event: RoundEnded) -> arena_pb2.RoundEnded:
    return round_ended(event.match_id, event.result, event.totals, event.dealt_hands,
                       event.rotations)


def match_ended(event: MatchEnded) -> arena_pb2.MatchEnded:
    return arena_pb2.MatchEnded(match_id=event.match_id, totals=event.totals, ranks=event.ranks,
                                forfeited_seats=event.forfeited_seats, record_id=event.record_id)


def referee_message(event: BotEvent) -> arena_pb2.RefereeMessage:
    """The RefereeMessage of any event a bot is sent, built from the event alone."""
    if isinstance(event, AnswerJudged):
        return arena_pb2.RefereeMessage(answer_result=arena_pb2.AnswerResult(
            match_id=event.match_id, request_id=event.request_id,
            status=_VERDICT_TO_PB[event.verdict], reason=event.reason, strikes=event.strikes,
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
            protocol_version=PROTOCOL_VERSION, bot_name=event.bot_name,
            session_id=event.session_id, resumed=event.resumed))
    if isinstance(event, Assigned):
        return arena_pb2.RefereeMessage(assignment=arena_pb2.MatchAssignment(
            match_id=event.match_id, address=event.address, ticket=event.ticket,
            tls=event.tls))
    if isinstance(event, Goodbye):
        return arena_pb2.RefereeMessage(goodbye=arena_pb2.Goodbye(
            reason=_GOODBYE_TO_PB[event.reason], message=event.message,
            reconnect=event.reconnect, retry_after_ms=event.retry_after_ms))
    assert_never(event)


def encode_event(event: BotEvent) -> bytes:
    return referee_message(event).SerializeToString()


class MatchWire:
    """One match's messages to its bots. It keeps the history of the round in play as
    serialized ``Observation.history`` entries, one appended as each action is broadcast, and
    splices them into every DecisionRequest as bytes: the history grows with every action, and
    converting it again for every request was the largest cost of asking for a decision."""

    __slots__ = ("_count", "_history", "_round")

    def __init__(self) -> None:
        self._round = -1
        self._count = 0
        self._history = bytearray()

    def _follow(self, round_index: int) -> None:
        if round_index != self._round:
            self._round = round_index
            self._count = 0
            self._history = bytearray()

    def encode(self, event: BotEvent) -> bytes:
        if isinstance(event, DecisionRequested):
            obs = event.observation
            self._follow(obs.round_index)
            assert len(obs.history) == self._count, "every action of the round is encoded once"
            return decision_request_bytes(obs, event.match_id, event.request_id,
                                          event.deadline_ms, event.time_bank_ms,
                                          bytes(self._history))
        if isinstance(event, ActionPlayed):
            action = self._keep(event)
            return length_delimited(_PUBLIC_EVENT_TAG, b"".join((
                _str_field(b"\x0a", event.match_id), _int_field(b"\x10", event.round_index),
                length_delimited(b"\x1a", action))))
        return encode_event(event)

    def played(self, event: ActionPlayed) -> None:
        self._keep(event)

    def _keep(self, event: ActionPlayed) -> bytes:
        action = public_action_bytes(event.action, event.by_referee)
        self._follow(event.round_index)
        self._history += length_delimited(_HISTORY_TAG, action)
        self._count += 1
        return action


class ProtobufWire:
    """The referee's `events.Wire`: scout.v1 messages, serialized."""

    def for_match(self, match_id: str) -> MatchWire:
        return MatchWire()

    def encode(self, event: BotEvent) -> bytes:
        return encode_event(event)


# ----- answers from bots ------------------------------------------------------------------

MAX_BUNDLE_MESSAGES = 1000
"""The most messages one bundle may hold, either way (PROTOCOL.md §3.6.2)."""
MAX_BUNDLE_BYTES = 1 << 20
"""The referee's bundles stay under this size, far below a client's 4 MiB receive limit."""
_BUNDLE_TAG = bytes([(13 << 3) | 2])  # RefereeMessage.bundle, length-delimited
_BUNDLE_ITEM_TAG = bytes([(1 << 3) | 2])  # RefereeBundle.messages, length-delimited


def bundle_bytes(messages: Sequence[bytes]) -> bytes:
    """The serialized RefereeMessage{bundle} holding ``messages`` (each a serialized
    RefereeMessage) in order, built from their bytes without parsing them again."""
    body = b"".join(length_delimited(_BUNDLE_ITEM_TAG, message) for message in messages)
    return length_delimited(_BUNDLE_TAG, body)


def read_answers(message: arena_pb2.BotMessage
                 ) -> list[RotationAnswer | ActionAnswer | arena_pb2.RefereeMessage]:
    """What a message from a bot says, in order: one `read_answer` for a single message, one
    per message of a BotBundle (a Hello or a bundle inside one is answered with a ProtocolError
    in its place, and an empty bundle or one of more than `MAX_BUNDLE_MESSAGES` with one error
    alone: every message a bot sends gets a reaction)."""
    if message.WhichOneof("body") != "bundle":
        return [read_answer(message)]
    inner = message.bundle.messages
    if not inner:
        return [arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
            code=arena_pb2.ERROR_CODE_BAD_MESSAGE,
            message="the BotBundle is empty: a bundle holds the answers it carries, at "
                    "least one"))]
    if len(inner) > MAX_BUNDLE_MESSAGES:
        return [arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
            code=arena_pb2.ERROR_CODE_BAD_MESSAGE,
            message=f"a BotBundle holds at most {MAX_BUNDLE_MESSAGES} messages, this one "
                    f"{len(inner)}: none of them was read"))]
    return [read_answer(each, in_bundle=True) for each in inner]


def read_answer(message: arena_pb2.BotMessage, in_bundle: bool = False
                ) -> RotationAnswer | ActionAnswer | arena_pb2.RefereeMessage:
    """A bot's answer, or the ProtocolError to send back when the message is not an answer."""
    kind = message.WhichOneof("body")
    if kind == "action":
        choice = message.action
        try:
            action = action_from_pb(choice.action)
        except MalformedAction as exc:
            return ActionAnswer(choice.match_id, choice.request_id, None, str(exc))
        return ActionAnswer(choice.match_id, choice.request_id, action)
    if kind == "rotation":
        rotation = message.rotation
        return RotationAnswer(rotation.match_id, rotation.request_id, rotation.rotate)
    if kind == "hello":
        text = "Hello is sent once, first, on its own"
    elif kind == "bundle":
        text = ("a BotBundle inside a BotBundle is not read: put every message in one bundle"
                if in_bundle else "a BotBundle is read by read_answers")
    else:
        text = "a BotMessage needs a body: rotation, action or bundle"
    return arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(
        code=arena_pb2.ERROR_CODE_BAD_MESSAGE, message=text))


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
