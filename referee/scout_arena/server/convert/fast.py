"""The fast path: the hot messages written as bytes, pinned to the object mapping's.

A DecisionRequest carries the round's whole history, every card of the hand and the legal
moves; building it as messages was most of the referee's cost per decision. Here it is spliced
from serialized pieces instead: the history kept as bytes since the round began (`MatchWire`),
each card's and legal move's entry and each recurring field serialized once and cached, a
broadcast serialized once for the whole table. Every tag comes from the generated descriptors
(`tags`), every cache is a `BoundedCache`, and tests pin the bytes to those of the object
mapping's messages (`objects`), serialized.
"""

from __future__ import annotations

from collections.abc import Sequence

from scout.v1 import arena_pb2, game_pb2
from scout_rules import Card, Observation, PublicAction, Show

from ..events import ActionPlayed, BotEvent, DecisionRequested
from . import tags
from .cache import BoundedCache
from .objects import CARD_PB, END_TO_PB, KIND_TO_PB, encode_event, legal_scouts_to_pb, show_to_pb

TAGS = tags.TagTable()
"""Every tag this module writes, read from the descriptors as it is imported."""

_Observation, _DecisionRequest = game_pb2.Observation, arena_pb2.DecisionRequest
_PublicAction, _PublicEvent = game_pb2.PublicAction, arena_pb2.PublicEvent
_RefereeMessage = arena_pb2.RefereeMessage

_OBS_MATCH_ID = TAGS.delimited(_Observation, "match_id")
_OBS_SEAT = TAGS.varint(_Observation, "seat")
_OBS_NUM_PLAYERS = TAGS.varint(_Observation, "num_players")
_OBS_ROUND_INDEX = TAGS.varint(_Observation, "round_index")
_OBS_NUM_ROUNDS = TAGS.varint(_Observation, "num_rounds")
_OBS_STARTING_SEAT = TAGS.varint(_Observation, "starting_seat")
_OBS_HAND = TAGS.delimited(_Observation, "hand")
_OBS_HAND_SIZES = TAGS.packed(_Observation, "hand_sizes")
_OBS_ACTIVE_SET = TAGS.delimited(_Observation, "active_set")
_OBS_ACTIVE_OWNER = TAGS.optional_varint(_Observation, "active_owner")
_OBS_CAPTURED_COUNTS = TAGS.packed(_Observation, "captured_counts")
_OBS_SCOUT_CHIPS = TAGS.packed(_Observation, "scout_chips")
_OBS_SCOUT_SHOW_TOKENS = TAGS.packed(_Observation, "scout_show_tokens")
_OBS_SCORES = TAGS.packed(_Observation, "scores")
_OBS_CURRENT_SEAT = TAGS.varint(_Observation, "current_seat")
_OBS_HISTORY = TAGS.delimited(_Observation, "history")

_REQ_MATCH_ID = TAGS.delimited(_DecisionRequest, "match_id")
_REQ_REQUEST_ID = TAGS.varint(_DecisionRequest, "request_id")
_REQ_OBSERVATION = TAGS.delimited(_DecisionRequest, "observation")
_REQ_LEGAL_SHOWS = TAGS.delimited(_DecisionRequest, "legal_shows")
_REQ_LEGAL_SCOUTS = TAGS.delimited(_DecisionRequest, "legal_scouts")
_REQ_SCOUT_AND_SHOW = TAGS.varint(_DecisionRequest, "scout_and_show_available")
_REQ_DEADLINE_MS = TAGS.varint(_DecisionRequest, "deadline_ms")
_REQ_TIME_BANK_MS = TAGS.varint(_DecisionRequest, "time_bank_ms")

_ACTION_SEAT = TAGS.varint(_PublicAction, "seat")
_ACTION_KIND = TAGS.varint(_PublicAction, "kind")
_ACTION_CARDS = TAGS.delimited(_PublicAction, "cards")
_ACTION_START = TAGS.varint(_PublicAction, "start")
_ACTION_LENGTH = TAGS.varint(_PublicAction, "length")
_ACTION_END = TAGS.varint(_PublicAction, "end")
_ACTION_INSERT_AT = TAGS.varint(_PublicAction, "insert_at")
_ACTION_BY_REFEREE = TAGS.varint(_PublicAction, "by_referee")

_EVENT_MATCH_ID = TAGS.delimited(_PublicEvent, "match_id")
_EVENT_ROUND_INDEX = TAGS.varint(_PublicEvent, "round_index")
_EVENT_ACTION = TAGS.delimited(_PublicEvent, "action")

_MSG_DECISION_REQUEST = TAGS.delimited(_RefereeMessage, "decision_request")
_MSG_PUBLIC_EVENT = TAGS.delimited(_RefereeMessage, "public_event")
_MSG_BUNDLE = TAGS.delimited(_RefereeMessage, "bundle")
_BUNDLE_MESSAGES = TAGS.delimited(arena_pb2.RefereeBundle, "messages")


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative ``value``; the one-byte ones made once."""
    return _SMALL_VARINTS[value] if value < 0x80 else tags.varint(value)


_SMALL_VARINTS = [bytes([i]) for i in range(0x80)]
_TRUE = varint(1)


def length_delimited(tag: bytes, data: bytes) -> bytes:
    """One serialized length-delimited field (``tag`` already holds its number and wire type):
    how the referee splices messages it has as bytes into the ones it sends."""
    size = len(data)
    return b"".join((tag, _SMALL_VARINTS[size] if size < 0x80 else varint(size), data))


def history_entry_bytes(action: game_pb2.PublicAction) -> bytes:
    """One serialized ``Observation.history`` entry; the referee appends one per action."""
    return length_delimited(_OBS_HISTORY, action.SerializeToString())


_SHOW_ENTRIES: BoundedCache[Show, bytes] = BoundedCache(4096)
"""Keyed by Show (start, length): under 300 of them with hands of 20 cards or fewer."""
_SCOUT_ENTRIES: BoundedCache[tuple[int, int], bytes] = BoundedCache(1024)
"""Keyed by (hand size, active set size), as `legal_scouts_to_pb`: a few hundred shapes."""


def _legal_shows_bytes(shows: Sequence[Show]) -> bytes:
    """The serialized ``legal_shows`` entries: each (start, length) is serialized once."""
    entries = _SHOW_ENTRIES.entries
    parts = []
    for show in shows:
        entry = entries.get(show)
        if entry is None:
            entry = _SHOW_ENTRIES.keep(show, length_delimited(
                _REQ_LEGAL_SHOWS, show_to_pb(show).SerializeToString()))
        parts.append(entry)
    return b"".join(parts)


def _legal_scouts_bytes(obs: Observation) -> bytes:
    """The serialized ``legal_scouts`` entries: they depend only on the hand's and the active
    set's sizes (`legal_scouts_to_pb`), so each shape is serialized once."""
    if not obs.can_scout():
        return b""
    key = (len(obs.hand), len(obs.active_set))
    entry = _SCOUT_ENTRIES.entries.get(key)
    if entry is None:
        entry = _SCOUT_ENTRIES.keep(key, b"".join(
            length_delimited(_REQ_LEGAL_SCOUTS, scout.SerializeToString())
            for scout in legal_scouts_to_pb(obs)))
    return entry


def _varint_signed(value: int) -> bytes:
    """An int32's varint: a negative one is sign-extended to ten bytes, as protobuf does."""
    return varint(value) if value >= 0 else varint(value & 0xFFFF_FFFF_FFFF_FFFF)


_FIELDS: BoundedCache[tuple[bytes, int | str | tuple[int, ...]], bytes] = BoundedCache(8192)
"""Serialized fields seen before, by tag and value: a match's id, its time control, most
request ids and the short tuples of counters (hand sizes, chips, scores) recur from request
to request. 8192 holds a thousand running matches' ids and request ids besides the counters
of a round; match ids come and go, so the bound is what keeps it from growing for ever."""


def _str_field(tag: bytes, value: str) -> bytes:
    """A proto3 string field (omitted at its default, empty)."""
    key = (tag, value)
    data = _FIELDS.entries.get(key)
    if data is None:
        data = _FIELDS.keep(key, length_delimited(tag, value.encode()) if value else b"")
    return data


def _int_field(tag: bytes, value: int) -> bytes:
    """A proto3 int32 field (omitted at its default, 0)."""
    key = (tag, value)
    data = _FIELDS.entries.get(key)
    if data is None:
        data = _FIELDS.keep(key, tag + _varint_signed(value) if value else b"")
    return data


def _packed_ints(tag: bytes, values: tuple[int, ...]) -> bytes:
    """A packed repeated int32 or bool field (omitted when empty)."""
    key = (tag, values)
    data = _FIELDS.entries.get(key)
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
    return _FIELDS.keep(key, data)


_KIND_FIELDS = {kind: _ACTION_KIND + varint(pb) for kind, pb in KIND_TO_PB.items()}
_END_FIELDS = {end: _ACTION_END + varint(pb) for end, pb in END_TO_PB.items()}


def public_action_bytes(action: PublicAction, by_referee: bool = False) -> bytes:
    """The serialized `public_action_to_pb`, written field by field (one per action played,
    and building the message cost more than the rest of recording it); a test pins the bytes
    to the message's."""
    start, length, end, insert_at = action.start, action.length, action.end, action.insert_at
    return b"".join((
        _int_field(_ACTION_SEAT, action.seat),
        _KIND_FIELDS[action.kind],
        _card_entries(_ACTION_CARD_ENTRIES, _ACTION_CARDS, action.cards),
        b"" if start is None else _int_field(_ACTION_START, start),
        b"" if length is None else _int_field(_ACTION_LENGTH, length),
        b"" if end is None else _END_FIELDS[end],
        b"" if insert_at is None else _int_field(_ACTION_INSERT_AT, insert_at),
        _BY_REFEREE if by_referee else b"",
    ))


_BY_REFEREE = _ACTION_BY_REFEREE + _TRUE


def _card_table(tag: bytes) -> dict[tuple[int, int], bytes]:
    """Each card of the deck as one serialized entry of the repeated field ``tag``."""
    return {key: length_delimited(tag, card.SerializeToString()) for key, card in CARD_PB.items()}


_HAND_ENTRIES = _card_table(_OBS_HAND)
_ACTIVE_ENTRIES = _card_table(_OBS_ACTIVE_SET)
_ACTION_CARD_ENTRIES = _card_table(_ACTION_CARDS)
_SEAT_FIELDS: BoundedCache[tuple[int, ...], bytes] = BoundedCache(4096)
"""Keyed by (seat, players, round, rounds, starting seat): 224 combinations for matches of 2
to 5 players of as many rounds; the bound is for tables of many more rounds."""


def _seat_fields(obs: Observation) -> bytes:
    """Observation fields 2-6 (the seat's place in its match and round), serialized once per
    combination: they change once a round."""
    key = (obs.seat, obs.num_players, obs.round_index, obs.num_rounds, obs.starting_seat)
    data = _SEAT_FIELDS.entries.get(key)
    if data is None:
        data = _SEAT_FIELDS.keep(key, b"".join((
            _int_field(_OBS_SEAT, obs.seat), _int_field(_OBS_NUM_PLAYERS, obs.num_players),
            _int_field(_OBS_ROUND_INDEX, obs.round_index),
            _int_field(_OBS_NUM_ROUNDS, obs.num_rounds),
            _int_field(_OBS_STARTING_SEAT, obs.starting_seat))))
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
        _str_field(_OBS_MATCH_ID, match_id),
        _seat_fields(obs),
        _card_entries(_HAND_ENTRIES, _OBS_HAND, obs.hand),
        _packed_ints(_OBS_HAND_SIZES, obs.hand_sizes),
        _card_entries(_ACTIVE_ENTRIES, _OBS_ACTIVE_SET, obs.active_set),
        b"" if owner is None else _OBS_ACTIVE_OWNER + _varint_signed(owner),
        _packed_ints(_OBS_CAPTURED_COUNTS, obs.captured_counts),
        _packed_ints(_OBS_SCOUT_CHIPS, obs.scout_chips),
        _packed_ints(_OBS_SCOUT_SHOW_TOKENS, obs.scout_show_tokens),
        _packed_ints(_OBS_SCORES, obs.scores),
        _int_field(_OBS_CURRENT_SEAT, -1 if current is None else current),
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
        _str_field(_REQ_MATCH_ID, match_id),
        _int_field(_REQ_REQUEST_ID, request_id),
        _legal_shows_bytes(shows),
        _legal_scouts_bytes(obs),
        _SCOUT_AND_SHOW if can_scout_and_show else b"",
        _int_field(_REQ_DEADLINE_MS, deadline_ms),
        _int_field(_REQ_TIME_BANK_MS, time_bank_ms),
        length_delimited(_REQ_OBSERVATION, observation_bytes(obs, match_id) + history)))
    return length_delimited(_MSG_DECISION_REQUEST, request)


_SCOUT_AND_SHOW = _REQ_SCOUT_AND_SHOW + _TRUE


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
            return length_delimited(_MSG_PUBLIC_EVENT, b"".join((
                _str_field(_EVENT_MATCH_ID, event.match_id),
                _int_field(_EVENT_ROUND_INDEX, event.round_index),
                length_delimited(_EVENT_ACTION, action))))
        return encode_event(event)

    def played(self, event: ActionPlayed) -> None:
        self._keep(event)

    def _keep(self, event: ActionPlayed) -> bytes:
        action = public_action_bytes(event.action, event.by_referee)
        self._follow(event.round_index)
        self._history += length_delimited(_OBS_HISTORY, action)
        self._count += 1
        return action


class ProtobufWire:
    """The referee's `events.Wire`: scout.v1 messages, serialized."""

    def for_match(self, match_id: str) -> MatchWire:
        return MatchWire()

    def encode(self, event: BotEvent) -> bytes:
        return encode_event(event)


def bundle_bytes(messages: Sequence[bytes]) -> bytes:
    """The serialized RefereeMessage{bundle} holding ``messages`` (each a serialized
    RefereeMessage) in order, built from their bytes without parsing them again."""
    body = b"".join(length_delimited(_BUNDLE_MESSAGES, message) for message in messages)
    return length_delimited(_MSG_BUNDLE, body)

