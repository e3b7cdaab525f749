"""What an onlooker may see of a match at any moment: the public table, never a hidden card.

The web pages' live view and the referee's spectator stream are built from `spectator_view`,
so the rule "a hand of the round in play is shown only as its size" lives in one place. Hands
appear once their round has ended, when the game reveals them anyway; a Scout's flip stays
private (`PublicAction` carries no flip).
"""

from __future__ import annotations

from dataclasses import dataclass

from .actions import PublicAction
from .cards import Card, Hand
from .rounds import Phase, RoundEnd
from .state import State


@dataclass(frozen=True, slots=True)
class FinishedRound:
    """A round that has ended, as everyone saw it revealed."""

    round_index: int
    end_reason: RoundEnd
    exempt_seat: int | None
    scores: tuple[int, ...]
    hands: tuple[Hand, ...]


@dataclass(frozen=True, slots=True)
class SpectatorView:
    """The public state of a match: hand sizes, never the cards of a hand still in play."""

    num_players: int
    round_index: int
    phase: Phase
    hand_sizes: tuple[int, ...]
    active_set: tuple[Card, ...]
    active_owner: int | None
    captured: tuple[int, ...]
    scout_chips: tuple[int, ...]
    scout_show_tokens: tuple[bool, ...]
    scores: tuple[int, ...]
    current_seat: int | None
    history: tuple[PublicAction, ...]
    finished_rounds: tuple[FinishedRound, ...]


def spectator_view(state: State) -> SpectatorView:
    """The onlooker's view of ``state`` (built from public fields only)."""
    n = state.num_players
    return SpectatorView(
        num_players=n,
        round_index=state.round_index,
        phase=state.phase,
        hand_sizes=tuple(len(state.hand(s)) for s in range(n)),
        active_set=tuple(state.active_set),
        active_owner=state.active_owner,
        captured=tuple(len(c) for c in state.captured),
        scout_chips=tuple(state.scout_chips),
        scout_show_tokens=tuple(state.scout_show_tokens),
        scores=tuple(state.scores),
        current_seat=state.current_seat,
        history=tuple(state.history),
        finished_rounds=tuple(
            FinishedRound(r.round_index, r.end_reason, r.exempt_seat, r.scores, r.hands)
            for r in state.round_results),
    )
