"""The referee's protobuf edge: where scout.v1 messages and the referee's values meet.

Everything else in the referee speaks engine types and `events`; this package is the one codec
between them and the wire, in four parts:

- `objects`: the object mapping (engine types and events to messages and back), the spec;
- `fast`: the hot messages (DecisionRequests, broadcasts, bundles) spliced as bytes, with tags
  from the descriptors (`tags`) and its caches bounded (`cache`), pinned to `objects` by tests;
- `answers`: bots' messages read into answers, or the ProtocolError to send back.
"""

from __future__ import annotations

from .answers import MAX_BUNDLE_BYTES, MAX_BUNDLE_MESSAGES, read_answer, read_answers
from .fast import (
    MatchWire,
    ProtobufWire,
    bundle_bytes,
    decision_request_bytes,
    history_entry_bytes,
    length_delimited,
    observation_bytes,
    public_action_bytes,
    varint,
)
from .objects import (
    action_from_pb,
    action_to_pb,
    cards_to_pb,
    decision_request,
    encode_event,
    legal_scouts_to_pb,
    match_ended,
    match_info,
    match_status_from_pb,
    observation_to_pb,
    public_action_to_pb,
    public_event,
    referee_message,
    requested_time_control,
    rotation_request,
    round_ended,
    round_ended_event,
    scout_to_pb,
    show_to_pb,
    spectator_event,
)

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_MESSAGES",
    "MatchWire",
    "ProtobufWire",
    "action_from_pb",
    "action_to_pb",
    "bundle_bytes",
    "cards_to_pb",
    "decision_request",
    "decision_request_bytes",
    "encode_event",
    "history_entry_bytes",
    "legal_scouts_to_pb",
    "length_delimited",
    "match_ended",
    "match_info",
    "match_status_from_pb",
    "observation_bytes",
    "observation_to_pb",
    "public_action_bytes",
    "public_action_to_pb",
    "public_event",
    "read_answer",
    "read_answers",
    "referee_message",
    "rotation_request",
    "round_ended",
    "round_ended_event",
    "scout_to_pb",
    "show_to_pb",
    "spectator_event",
    "requested_time_control",
    "varint",
]
