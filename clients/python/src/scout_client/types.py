"""The SDK's own value types: everything a bot sees or sends, in the game's words.

Bots never touch protobuf messages. These frozen dataclasses are what `Bot.act` and the hooks
receive, so a bot can be written, unit-tested and replayed without a referee; `convert` is the
one place that maps them to and from the wire. Sequences are tuples so every value is hashable
and can be compared with `==` (e.g. `action in observation.legal_shows`).

Cards, actions and the public history are the rules package's own (`scout_rules`): one model
of the game for the referee, the engine and bots. `Observation` is in `observation`; this module
adds the other messages and offers every type from one place.
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

PROTOCOL_VERSION = 1
"""The protocol version this SDK speaks (sent in Hello)."""


class AnswerStatus(Enum):
    """How the referee judged an answer (see the protocol contract, AnswerResult)."""

    UNSPECIFIED = "unspecified"
    ACCEPTED = "accepted"
    ILLEGAL = "illegal"
    MALFORMED = "malformed"
    STALE = "stale"
    UNKNOWN_MATCH = "unknown_match"
    TIMED_OUT = "timed_out"


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


class GoodbyeReason(Enum):
    """Why the referee closes a stream on purpose (see the protocol contract, §10.1)."""

    UNSPECIFIED = "unspecified"
    SHUTDOWN = "shutdown"
    """The referee is restarting or being drained; come back after `retry_after_ms`."""
    FINISHED = "finished"
    """The tournament or event this referee served is over."""


class MatchEndStatus(Enum):
    """How a match ended for the bot (`MatchEnded.status`, PROTOCOL.md §3.5)."""

    FINISHED = "finished"
    """Played to its end (forfeits included): totals, ranks and a record."""
    ABORTED = "aborted"
    """Stopped by the referee before its end (a shutdown that outlasted its drain): no result."""
    VOIDED = "voided"
    """Voided by the ladder (its referee node was lost, or it never began): no result."""


# --- what the referee sends ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeControl:
    """Time for each decision, and the extra bank for the whole match, in milliseconds."""

    decision_ms: int
    time_bank_ms: int


@dataclass(frozen=True, slots=True)
class Welcome:
    """The referee accepted the connection. `bot_name` is the authoritative name of the token."""

    protocol_version: int
    bot_name: str
    session_id: str
    resumed: bool


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
class AnswerResult:
    """What became of an answer. ILLEGAL and MALFORMED cost a strike but leave the request
    open; TIMED_OUT means the referee played the fallback."""

    match_id: str
    request_id: int
    status: AnswerStatus
    reason: str = ""
    strikes: int = 0
    time_bank_ms: int = 0

    @property
    def rejected(self) -> bool:
        """True for ILLEGAL and MALFORMED: a strike, and the request stays open."""
        return self.status in (AnswerStatus.ILLEGAL, AnswerStatus.MALFORMED)


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
class MatchEnded:
    """A match ended. Only a FINISHED one has a result: ranks are 1-based (1 is best) and
    forfeits rank last. An ABORTED or VOIDED one has none, and `reason` says why."""

    match_id: str
    totals: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    forfeited_seats: tuple[int, ...] = ()
    record_id: str = ""
    status: MatchEndStatus = MatchEndStatus.FINISHED
    reason: str = ""

    @property
    def finished(self) -> bool:
        """Whether the match was played to its end (it has a result)."""
        return self.status is MatchEndStatus.FINISHED


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A problem with a message that belongs to no request (e.g. a missing Hello)."""

    code: ErrorCode
    message: str = ""


@dataclass(frozen=True, slots=True)
class Goodbye:
    """The referee is ending the stream on purpose; the last message before the stream ends.
    With `reconnect` the SDK comes back after `retry_after_ms` (a planned restart, not a fault);
    without it `run_bot` returns. `message` is for people and logs."""

    reason: GoodbyeReason = GoodbyeReason.UNSPECIFIED
    message: str = ""
    reconnect: bool = False
    retry_after_ms: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    """Play `match_id` on the referee node at `address` (a ladder with nodes, PROTOCOL.md
    §3.8): the SDK opens a stream there with `ticket` as its bearer token, unless it has one
    open, and plays the match on it like any other."""

    match_id: str
    address: str
    ticket: str
    tls: bool = False


@dataclass(frozen=True, slots=True)
class Probation:
    """The ladder put the bot on probation (`active`: it schedules no match for it) or lifted
    it (PROTOCOL.md §3.9). With `lifted_by_reconnect`, a new stream (the bot restarted after
    a fix) lifts it; otherwise only its owner or the operator can."""

    active: bool
    reason: str = ""
    lifted_by_reconnect: bool = False


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
