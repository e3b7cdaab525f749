"""The SDK's own value types: everything a bot sees or sends, in the game's words.

Bots never touch protobuf messages. These frozen dataclasses are what `Bot.act` and the hooks
receive, so a bot can be written, unit-tested and replayed without a referee; `convert` is the
one place that maps them to and from the wire. Sequences are tuples so every value is hashable
and can be compared with `==` (e.g. `action in observation.legal_shows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

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
    "Hello",
    "MatchEnded",
    "MatchStart",
    "Observation",
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


class End(Enum):
    """Which end of the active set a Scout takes."""

    LEFT = "left"
    RIGHT = "right"


class ActionKind(Enum):
    """The kind of an action in the public history."""

    UNSPECIFIED = "unspecified"
    SHOW = "show"
    SCOUT = "scout"
    SCOUT_AND_SHOW = "scout_and_show"


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


# --- cards and actions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Card:
    """One card as held or shown: `face` is in play, `other` is the turned-away value."""

    face: int
    other: int

    def flipped(self) -> Card:
        """The same card turned round, as after a rotation or a turned Scout."""
        return Card(self.other, self.face)


@dataclass(frozen=True, slots=True)
class Show:
    """Play `hand[start : start + length]` as the new active set (0-based positions)."""

    start: int
    length: int

    @property
    def stop(self) -> int:
        """One past the last position shown, so `hand[show.start : show.stop]` is the group."""
        return self.start + self.length


@dataclass(frozen=True, slots=True)
class Scout:
    """Take the `end` card of the active set, turned if `flip`, into the hand before position
    `insert_at` (the hand size appends it on the right)."""

    end: End
    flip: bool
    insert_at: int


@dataclass(frozen=True, slots=True)
class ScoutAndShow:
    """The once-per-round Scout & Show (3-5 players); `show` indexes the hand after the Scout."""

    scout: Scout
    show: Show


Action: TypeAlias = Show | Scout | ScoutAndShow
"""What `Bot.act` returns."""


@dataclass(frozen=True, slots=True)
class PublicAction:
    """An action as every seat saw it. The turn (flip) of a scouted card is private, so it is
    not here. Fields that do not apply to the kind are None: a plain Scout has no start/length,
    a Show has no end/insert_at."""

    seat: int
    kind: ActionKind
    cards: tuple[Card, ...] = ()
    start: int | None = None
    length: int | None = None
    end: End | None = None
    insert_at: int | None = None
    by_referee: bool = False

    @property
    def scouted_card(self) -> Card | None:
        """The card taken by a Scout or Scout & Show, as it lay on the table."""
        if self.kind in (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW) and self.cards:
            return self.cards[0]
        return None

    @property
    def shown_cards(self) -> tuple[Card, ...]:
        """The group a Show or Scout & Show put on the table (empty for a plain Scout)."""
        if self.kind is ActionKind.SHOW:
            return self.cards
        if self.kind is ActionKind.SCOUT_AND_SHOW:
            return self.cards[1:]
        return ()


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


def _rotate(hand: tuple[Card, ...]) -> tuple[Card, ...]:
    return tuple(card.flipped() for card in reversed(hand))


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
        return _rotate(self.hand)

    def rotated_faces(self) -> tuple[int, ...]:
        """The values in play if the bot rotates."""
        return tuple(card.face for card in self.rotated_hand())


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """Everything the seat may know when it is its turn, plus the referee's request: the legal
    Shows and Scouts (any entry may be returned as is), whether a Scout & Show is possible, and
    the clock. Never another seat's hand."""

    match_id: str = ""
    seat: int = 0
    num_players: int = 0
    round_index: int = 0
    num_rounds: int = 0
    starting_seat: int = 0
    hand: tuple[Card, ...] = ()
    hand_sizes: tuple[int, ...] = ()
    active_set: tuple[Card, ...] = ()
    active_owner: int | None = None
    captured_counts: tuple[int, ...] = ()
    scout_chips: tuple[int, ...] = ()
    scout_show_tokens: tuple[bool, ...] = ()
    scores: tuple[int, ...] = ()
    current_seat: int = 0
    history: tuple[PublicAction, ...] = ()
    legal_shows: tuple[Show, ...] = ()
    legal_scouts: tuple[Scout, ...] = ()
    scout_and_show_available: bool = False
    request_id: int = 0
    deadline_ms: int = 0
    time_bank_ms: int = 0

    def hand_faces(self) -> tuple[int, ...]:
        """The values in play in the hand, leftmost first."""
        return tuple(card.face for card in self.hand)

    def active_faces(self) -> tuple[int, ...]:
        """The values of the active set, leftmost first (empty when the table is clear)."""
        return tuple(card.face for card in self.active_set)

    def table_clear(self) -> bool:
        """True when there is no active set, so any group may be shown."""
        return not self.active_set

    def legal_actions(self) -> tuple[Action, ...]:
        """Every legal Show and Scout (Scout & Show combinations are left to `scout_and_shows`,
        because the referee does not list them)."""
        return (*self.legal_shows, *self.legal_scouts)

    def cards_of(self, show: Show) -> tuple[Card, ...]:
        """The cards a Show from the current hand would put on the table."""
        return self.hand[show.start : show.stop]

    def scouted_card(self, scout: Scout) -> Card:
        """The card a Scout takes, turned as it would enter the hand."""
        card = self.active_set[0 if scout.end is End.LEFT else -1]
        return card.flipped() if scout.flip else card

    def hand_after(self, scout: Scout) -> tuple[Card, ...]:
        """The hand after a Scout, which is what the Show part of a Scout & Show indexes."""
        hand = list(self.hand)
        hand.insert(scout.insert_at, self.scouted_card(scout))
        return tuple(hand)

    def active_after(self, scout: Scout) -> tuple[Card, ...]:
        """What remains of the active set after a Scout (what a Scout & Show must beat)."""
        return self.active_set[1:] if scout.end is End.LEFT else self.active_set[:-1]

    def scout_and_shows(self) -> list[ScoutAndShow]:
        """Every Scout & Show this seat may play now (empty when none is available), found by
        trying each legal Scout against the hand it would leave."""
        from .groups import scout_and_shows  # groups imports this module

        return scout_and_shows(self)

    def is_legal(self, action: Action) -> bool:
        """Whether the referee will accept `action`: Shows and Scouts are checked against the
        request's lists, a Scout & Show against the group rules on the hand it leaves."""
        from .groups import is_legal_scout_and_show  # groups imports this module

        if isinstance(action, Show):
            return action in self.legal_shows
        if isinstance(action, Scout):
            return action in self.legal_scouts
        return is_legal_scout_and_show(self, action)

    def fallback(self) -> Action:
        """The always-legal answer the SDK sends when the bot cannot: the first legal Show
        (lowest start, then shortest, like the referee's own fallback), else the first legal
        Scout."""
        if self.legal_shows:
            return min(self.legal_shows, key=lambda show: (show.start, show.length))
        if self.legal_scouts:
            return self.legal_scouts[0]
        return Scout(End.LEFT, flip=False, insert_at=0)


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
    """A match ended. Ranks are 1-based (1 is best); forfeits rank last."""

    match_id: str
    totals: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    forfeited_seats: tuple[int, ...] = ()
    record_id: str = ""


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """A problem with a message that belongs to no request (e.g. a missing Hello)."""

    code: ErrorCode
    message: str = ""


RefereeMessage: TypeAlias = (
    Welcome
    | MatchStart
    | RotationRequest
    | Observation
    | AnswerResult
    | PublicEvent
    | RoundEnded
    | MatchEnded
    | ProtocolError
)
"""Anything the referee sends; a DecisionRequest arrives as an `Observation`."""


# --- what a bot sends ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """The first message of every stream."""

    bot_name: str
    bot_version: str
    protocol_version: int = PROTOCOL_VERSION
    max_concurrent_matches: int = 1


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
