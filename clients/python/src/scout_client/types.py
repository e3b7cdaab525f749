"""The SDK's own value types: everything a bot sees or sends, in the game's words.

Bots never touch protobuf messages. These frozen dataclasses are what `Bot.act` and the hooks
receive, so a bot can be written, unit-tested and replayed without a referee; `convert` is the
one place that maps them to and from the wire. Sequences are tuples so every value is hashable
and can be compared with `==` (e.g. `action in observation.legal_shows`).

Cards, actions and the public history are the rules package's own (`scout_rules`): one model
of the game for the referee, the engine and bots; so are the connection messages and statuses
the referee builds from the same definitions (`scout_rules.protocol`). `Observation` is in
`observation`; this module adds the other messages and offers every type from one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from scout_rules import (
    Action,
    ActionKind,
    Card,
    End,
    Hand,
    PublicAction,
    Scout,
    ScoutAndShow,
    Show,
)
from scout_rules.protocol import (
    PROTOCOL_VERSION,
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

from .observation import Observation

__all__ = [
    "PROTOCOL_VERSION",
    "Action",
    "ActionChoice",
    "ActionKind",
    "AnswerResult",
    "AnswerStatus",
    "BotMessage",
    "Card",
    "End",
    "ErrorCode",
    "Assignment",
    "Goodbye",
    "GoodbyeReason",
    "Hello",
    "MatchEndStatus",
    "MatchEnded",
    "MatchMessage",
    "MatchStart",
    "Observation",
    "Probation",
    "ProtocolError",
    "PublicAction",
    "PublicEvent",
    "RefereeMessage",
    "RotationChoice",
    "RotationRequest",
    "RoundEndReason",
    "RoundEnded",
    "Scout",
    "ScoutAndShow",
    "Show",
    "TimeControl",
    "Welcome",
]


class RoundEndReason(Enum):
    """Why a round ended."""

    UNSPECIFIED = "unspecified"
    HAND_EMPTIED = "hand_emptied"
    UNBEATEN_SHOW = "unbeaten_show"
    NO_LEGAL_MOVE = "no_legal_move"
    ACTION_LIMIT = "action_limit"


class ErrorCode(Enum):
    """Kinds of protocol errors that belong to no single request."""

    UNSPECIFIED = "unspecified"
    EXPECTED_HELLO = "expected_hello"
    UNSUPPORTED_PROTOCOL = "unsupported_protocol"
    BAD_MESSAGE = "bad_message"
    RATE_LIMITED = "rate_limited"


# --- what the referee sends ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchStart:
    """A match this bot is seated in begins, or (`resumed`) is resynced after a reconnect."""

    match_id: str
    seat: int
    player_names: tuple[str, ...]
    num_players: int
    num_rounds: int
    time_control: TimeControl
    resumed: bool = False
    time_bank_ms: int = 0
    strikes: int = 0


@dataclass(frozen=True, slots=True)
class RotationRequest:
    """Decide whether to rotate the dealt hand 180 degrees (order reversed, every card turned).
    All seats decide at once without seeing the others' choices."""

    match_id: str
    request_id: int
    round_index: int
    hand: tuple[Card, ...]
    deadline_ms: int = 0
    time_bank_ms: int = 0

    def hand_faces(self) -> tuple[int, ...]:
        """The values in play if the bot does not rotate."""
        return tuple(card.face for card in self.hand)

    def rotated_hand(self) -> tuple[Card, ...]:
        """The hand as it would be after rotating."""
        return tuple(Hand(self.hand).rotated())

    def rotated_faces(self) -> tuple[int, ...]:
        """The values in play if the bot rotates."""
        return tuple(card.face for card in self.rotated_hand())


@dataclass(frozen=True, slots=True)
class PublicEvent:
    """An action by any seat (one's own included), as every seat sees it."""

    match_id: str
    round_index: int
    action: PublicAction


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A round ended; every hand is revealed."""

    match_id: str
    round_index: int
    reason: RoundEndReason
    exempt_seat: int | None = None
    round_scores: tuple[int, ...] = ()
    totals: tuple[int, ...] = ()
    hands: tuple[tuple[Card, ...], ...] = ()
    dealt_hands: tuple[tuple[Card, ...], ...] = ()
    rotations: tuple[bool, ...] = ()


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A problem with a message that belongs to no request (e.g. a missing Hello)."""

    code: ErrorCode
    message: str = ""


MatchMessage: TypeAlias = (
    MatchStart
    | RotationRequest
    | Observation
    | AnswerResult
    | PublicEvent
    | RoundEnded
    | MatchEnded
)
"""A referee message about one match (each has a `match_id`): all but Welcome, ProtocolError and
Goodbye, which are about the connection."""

RefereeMessage: TypeAlias = (
    Welcome | MatchMessage | ProtocolError | Goodbye | Assignment | Probation
)
"""Anything the referee sends; a DecisionRequest arrives as an `Observation`."""


# --- what a bot sends ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """The first message of every stream. `lean` asks for a lean stream (PROTOCOL.md §3.6.1):
    no PublicEvent and no AnswerResult for an accepted answer; the next request's observation
    says what happened. The SDK asks for one unless the bot needs the events.
    `accepts_bundles`: the SDK reads RefereeBundles (PROTOCOL.md §3.6.2), so it always says so."""

    bot_name: str
    bot_version: str
    protocol_version: int = PROTOCOL_VERSION
    max_concurrent_matches: int = 1
    lean: bool = True
    accepts_bundles: bool = True


@dataclass(frozen=True, slots=True)
class RotationChoice:
    """Answer to a RotationRequest."""

    match_id: str
    request_id: int
    rotate: bool


@dataclass(frozen=True, slots=True)
class ActionChoice:
    """Answer to a DecisionRequest. `action` is None only when read from a message that carried
    none (which the referee judges MALFORMED)."""

    match_id: str
    request_id: int
    action: Action | None = None


BotMessage: TypeAlias = Hello | RotationChoice | ActionChoice
"""Anything a bot sends."""
