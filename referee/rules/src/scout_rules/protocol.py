"""The protocol's plain values that the referee and the SDK both speak: how a match ended for
its seats, why a stream is closed, what became of an answer, and the messages that carry
nothing but such values (PROTOCOL.md §3, §10.1).

They live here, beside the cards and actions, because this is the one package both sides may
import (the SDK knows nothing of the server): one definition, read by the referee as events
and by bots as messages. No wire type appears; each side's codec maps them to scout.v1.
The UNSPECIFIED members are what a reader makes of a value it does not know (PROTOCOL.md §14);
a referee never sends them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "DEFAULT_DECISION_MS",
    "DEFAULT_TIME_BANK_MS",
    "PROTOCOL_VERSION",
    "AnswerResult",
    "AnswerStatus",
    "Assignment",
    "Goodbye",
    "GoodbyeReason",
    "MatchEndStatus",
    "MatchEnded",
    "Probation",
    "TimeControl",
    "Welcome",
]

PROTOCOL_VERSION = 1
"""The protocol version the referee and the SDK speak (Hello and Welcome)."""

DEFAULT_DECISION_MS = 1000
"""Milliseconds a bot has for each decision before its bank is drawn on: what a match gets when
nobody chooses (the referee, the ladder, tournaments, SPRT runs and in-process matches)."""

DEFAULT_TIME_BANK_MS = 10_000
"""Milliseconds of a bot's per-match bank, spent when a decision overruns."""


class AnswerStatus(Enum):
    """How the referee judged an answer, or a request nobody answered in time."""

    UNSPECIFIED = "unspecified"
    ACCEPTED = "accepted"
    ILLEGAL = "illegal"
    MALFORMED = "malformed"
    STALE = "stale"
    UNKNOWN_MATCH = "unknown_match"
    TIMED_OUT = "timed_out"


class GoodbyeReason(Enum):
    """Why the referee ends a bot's stream on purpose (PROTOCOL.md §10.1)."""

    UNSPECIFIED = "unspecified"
    SHUTDOWN = "shutdown"
    """Restarting or being drained: come back after ``retry_after_ms``."""
    FINISHED = "finished"
    """The tournament or event this referee served is over: do not come back."""


class MatchEndStatus(Enum):
    """How a match ended for its seats (``MatchEnded.status``, PROTOCOL.md §3.5)."""

    FINISHED = "finished"
    """Played to its end (forfeits included): totals, ranks and a record."""
    ABORTED = "aborted"
    """Stopped by the referee before its end (a shutdown that outlasted its drain): no result."""
    VOIDED = "voided"
    """Voided by the ladder (its referee node was lost, or it never began): no result."""


@dataclass(frozen=True, slots=True)
class TimeControl:
    """Time for each decision, and the extra bank for the whole match, in milliseconds (a
    MatchStart's, a match request's); a bank of 0 means none."""

    decision_ms: int = DEFAULT_DECISION_MS
    time_bank_ms: int = DEFAULT_TIME_BANK_MS


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What became of an answer (or of a request nobody answered in time), with the seat's
    strikes and bank after it. ILLEGAL and MALFORMED cost a strike but leave the request open;
    TIMED_OUT means the referee played the fallback."""

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
class Welcome:
    """The referee accepted the stream. ``bot_name`` is the authoritative name of the token;
    ``resumed`` when the bot still holds seats in running matches."""

    protocol_version: int
    bot_name: str
    session_id: str
    resumed: bool


@dataclass(frozen=True, slots=True)
class Goodbye:
    """The referee ends the stream on purpose; the last message before the stream ends. With
    ``reconnect`` the bot comes back after ``retry_after_ms`` (a planned restart, not a fault).
    ``message`` is for people and logs."""

    reason: GoodbyeReason = GoodbyeReason.UNSPECIFIED
    message: str = ""
    reconnect: bool = False
    retry_after_ms: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    """Play ``match_id`` on the referee node at ``address``, with ``ticket`` as the bearer token
    of a stream there (PROTOCOL.md §3.8): sent by a ladder with nodes."""

    match_id: str
    address: str
    ticket: str
    tls: bool = False


@dataclass(frozen=True, slots=True)
class Probation:
    """The ladder put the bot on probation (``active``: it schedules no match for it) or lifted
    it (PROTOCOL.md §3.9). With ``lifted_by_reconnect``, a new stream (the bot restarted after
    a fix) lifts it; otherwise only its owner or the operator can."""

    active: bool
    reason: str = ""
    lifted_by_reconnect: bool = False


@dataclass(frozen=True, slots=True)
class MatchEnded:
    """A match ended. Only a FINISHED one has a result: ranks are 1-based (1 is best) and
    forfeits rank last, and its record is stored under ``record_id``. An ABORTED or VOIDED one
    has none, and ``reason`` says why."""

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
