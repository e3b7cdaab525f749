"""The one mapping between the rules package's values and the generated scout.v1 messages.

The referee (`scout_arena.server.convert`) and the SDK (`scout_client.convert`, `testing`) both
speak `scout_rules` types on one side of the wire; what they exchange (cards, actions, public
actions, the protocol's statuses and plain messages) is converted here, once, so the two sides
cannot drift. It ships with the stubs and imports only them and `scout_rules`; each side keeps
what is its own (the referee's byte-level fast path and events, the SDK's observation and
message unions).
"""

from __future__ import annotations

from .game import (
    CARD_PROTO,
    END_FROM_PROTO,
    END_TO_PROTO,
    KIND_FROM_PROTO,
    KIND_TO_PROTO,
    SeatView,
    action_from_proto,
    action_to_proto,
    card_from_proto,
    card_to_proto,
    cards_from_proto,
    cards_to_proto,
    inverse,
    observation_to_proto,
    public_action_from_proto,
    public_action_to_proto,
    scout_from_proto,
    scout_to_proto,
    show_from_proto,
    show_to_proto,
)
from .protocol import (
    END_STATUS_FROM_PROTO,
    END_STATUS_TO_PROTO,
    GOODBYE_FROM_PROTO,
    GOODBYE_TO_PROTO,
    STATUS_FROM_PROTO,
    STATUS_TO_PROTO,
    answer_result_from_proto,
    answer_result_to_proto,
    assignment_from_proto,
    assignment_to_proto,
    goodbye_from_proto,
    goodbye_to_proto,
    match_ended_from_proto,
    match_ended_to_proto,
    probation_from_proto,
    probation_to_proto,
    time_control_from_proto,
    time_control_to_proto,
    welcome_from_proto,
    welcome_to_proto,
)

__all__ = [
    "CARD_PROTO",
    "END_FROM_PROTO",
    "END_STATUS_FROM_PROTO",
    "END_STATUS_TO_PROTO",
    "END_TO_PROTO",
    "GOODBYE_FROM_PROTO",
    "GOODBYE_TO_PROTO",
    "KIND_FROM_PROTO",
    "KIND_TO_PROTO",
    "STATUS_FROM_PROTO",
    "STATUS_TO_PROTO",
    "SeatView",
    "action_from_proto",
    "action_to_proto",
    "answer_result_from_proto",
    "answer_result_to_proto",
    "assignment_from_proto",
    "assignment_to_proto",
    "card_from_proto",
    "card_to_proto",
    "cards_from_proto",
    "cards_to_proto",
    "goodbye_from_proto",
    "goodbye_to_proto",
    "inverse",
    "match_ended_from_proto",
    "match_ended_to_proto",
    "observation_to_proto",
    "probation_from_proto",
    "probation_to_proto",
    "time_control_from_proto",
    "time_control_to_proto",
    "public_action_from_proto",
    "public_action_to_proto",
    "scout_from_proto",
    "scout_to_proto",
    "show_from_proto",
    "show_to_proto",
    "welcome_from_proto",
    "welcome_to_proto",
]
