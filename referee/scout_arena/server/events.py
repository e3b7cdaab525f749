"""What happens at the referee, as plain values of engine types: the referee's own language.

A match emits these (requests to a seat, verdicts on answers, what the whole table sees, what
spectators see); bots' answers arrive as `RotationAnswer`/`ActionAnswer`. Only
`scout_arena.server.convert` turns them into scout.v1 messages and back, behind the `Wire`
port below, so the match logic can be read, tested and changed without protobuf in sight.
The connection messages and statuses that are plain values on both sides (a Welcome, a
MatchEnded, an answer's status...) are the rules package's (`scout_rules.protocol`), shared with
the SDK, and offered here with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Protocol

from scout_rules import Action, Card, Hand, Observation, PublicAction, RoundResult
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

__all__ = [
    "ActionAnswer",
    "ActionPlayed",
    "Answer",
    "AnswerResult",
    "AnswerStatus",
    "Assignment",
    "BotEvent",
    "DecisionRequested",
    "Goodbye",
    "GoodbyeReason",
    "MatchEndStatus",
    "MatchEnded",
    "MatchSnapshot",
    "MatchStarted",
    "MatchStatus",
    "MatchWire",
    "Probation",
    "Request",
    "RotationAnswer",
    "RotationRequested",
    "RoundEnded",
    "RoundStarted",
    "SpectatorEvent",
    "Welcome",
    "Wire",
]


class MatchStatus(Enum):
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


# ----- to one bot ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MatchStarted:
    """A seat's start of a match, sent again (``resumed``) after a reconnect with its clock."""

    match_id: str
    seat: int
    players: tuple[str, ...]
    num_players: int
    num_rounds: int
    time_control: TimeControl
    resumed: bool
    time_bank_ms: int
    strikes: int


@dataclass(frozen=True, slots=True)
class RotationRequested:
    """Whether to turn the dealt hand, asked of every seat at once as a round begins."""

    kind: ClassVar[str] = "rotation"

    match_id: str
    request_id: int
    seat: int
    round_index: int
    hand: tuple[Card, ...]
    deadline_ms: int
    time_bank_ms: int


@dataclass(frozen=True, slots=True)
class DecisionRequested:
    """The acting seat's turn: what it may know of the table (its observation)."""

    kind: ClassVar[str] = "decision"

    match_id: str
    request_id: int
    observation: Observation
    deadline_ms: int
    time_bank_ms: int


# ----- to the whole table (and spectators) ---------------------------------------------------

@dataclass(frozen=True, slots=True)
class ActionPlayed:
    """An action as every seat saw it; ``by_referee`` when it is the fallback."""

    match_id: str
    round_index: int
    action: PublicAction
    by_referee: bool


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """A round is over: its result, with every hand as dealt and as left, and the rotations."""

    match_id: str
    result: RoundResult
    totals: tuple[int, ...]
    dealt_hands: tuple[Hand, ...]
    rotations: tuple[bool | None, ...]


# ----- to spectators only --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RoundStarted:
    """A round is dealt; spectators see only how many cards each seat holds."""

    match_id: str
    round_index: int
    starting_seat: int
    hand_sizes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MatchSnapshot:
    """Who plays and how the match stands, as organisers and spectators may see it: the first
    thing a spectator gets, and the last one of a match that stopped without a result."""

    match_id: str
    status: MatchStatus
    players: tuple[str, ...]
    seed: int
    time_control: TimeControl
    round_index: int
    totals: tuple[int, ...]
    forfeited_seats: tuple[int, ...]
    ranks: tuple[int, ...]


# ----- from a bot ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RotationAnswer:
    kind: ClassVar[str] = "rotation"

    match_id: str
    request_id: int
    rotate: bool


@dataclass(frozen=True, slots=True)
class ActionAnswer:
    """``action`` is None when the bot's action could not be read; ``unreadable`` says why (the
    match judges it MALFORMED only if it answers the open request)."""

    kind: ClassVar[str] = "decision"

    match_id: str
    request_id: int
    action: Action | None
    unreadable: str = ""


BotEvent = (Welcome | Goodbye | Assignment | Probation | MatchStarted | RotationRequested
            | DecisionRequested | AnswerResult | ActionPlayed | RoundEnded | MatchEnded)
"""Everything a bot's stream carries."""

SpectatorEvent = MatchSnapshot | RoundStarted | ActionPlayed | RoundEnded | MatchEnded
"""Everything a spectator's stream carries."""

Request = RotationRequested | DecisionRequested
Answer = RotationAnswer | ActionAnswer


class MatchWire(Protocol):
    """One match's events as its bots' streams carry them. `encode` is called once per event, in
    the order the match emits them, and a broadcast once for the whole table: whatever the wire
    keeps across calls (the round's history, already serialized) relies on that."""

    def encode(self, event: BotEvent) -> bytes: ...

    def played(self, event: ActionPlayed) -> None:
        """An action that no stream of the table is to be sent: the wire keeps it (the round's
        history) without making its message. It stands for `encode` in the order above."""
        ...


class Wire(Protocol):
    """The port `convert` implements: events in, serialized messages out."""

    def for_match(self, match_id: str) -> MatchWire: ...

    def encode(self, event: BotEvent) -> bytes:
        """An event outside any match's order (a Welcome, an answer to a match the bot does
        not play)."""
        ...
