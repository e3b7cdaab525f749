"""Where a match is and how a round ended: the phase, a finished round, a round's log, ranks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from .actions import Action
from .cards import Card, Hand

MAX_ROUND_ACTIONS = 1000
"""Decision (docs/rules.md): a round that reaches this many actions ends there and is scored as
it stands, with no exempt seat. Play that only shows single cards which the next seat scouts
back can cycle forever; a referee must be able to promise every match ends."""

class Phase(Enum):
    """Where the match is: every seat choosing its rotation, turns being played, or done."""

    ROTATION = "rotation"
    PLAY = "play"
    MATCH_OVER = "match_over"


class RoundEnd(Enum):
    """Why a round ended."""

    HAND_EMPTIED = "hand_emptied"
    UNBEATEN_SHOW = "unbeaten_show"
    NO_LEGAL_MOVE = "no_legal_move"
    ACTION_LIMIT = "action_limit"


@dataclass(frozen=True, slots=True)
class RoundResult:
    """A finished round: why it ended, every hand revealed, each seat's round score, and the
    table as it was left (the next round is dealt at once, so this is the only trace of it)."""

    round_index: int
    end_reason: RoundEnd
    exempt_seat: int | None
    captured: tuple[int, ...]
    scout_chips: tuple[int, ...]
    hands: tuple[Hand, ...]
    scores: tuple[int, ...]
    active_set: tuple[Card, ...] = ()
    active_owner: int | None = None
    scout_show_tokens: tuple[bool, ...] = ()


@dataclass(slots=True)
class RoundLog:
    """Everything needed to write or replay one round: the deal, the rotations, the actions."""

    round_index: int
    starting_seat: int
    dealt_hands: tuple[Hand, ...]
    rotations: list[bool | None]
    actions: list[tuple[int, Action]]
    result: RoundResult | None = None


def rank_scores(scores: Sequence[int], forfeited: Iterable[int] = ()) -> tuple[int, ...]:
    """Competition ranks (1 = best; equal scores share a rank, the next rank skips). Forfeited
    seats rank below every seat that did not forfeit, ordered among themselves by score."""
    lost = set(forfeited)
    order = [(s in lost, -scores[s]) for s in range(len(scores))]
    return tuple(1 + sum(1 for other in order if other < mine) for mine in order)
