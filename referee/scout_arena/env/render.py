"""The table as text, for ``render()`` of both environments and for reading a failing test."""

from __future__ import annotations

from collections.abc import Sequence

from scout_rules import Card, Phase, State


def _cards(cards: Sequence[Card]) -> str:
    return " ".join(f"{c.face}/{c.other}" for c in cards) or "-"


def describe_table(state: State, names: Sequence[str]) -> str:
    """Round, phase, whose decision it is, the active set and, per seat, hand (face/other),
    captured cards, Scout chips, Scout & Show token and match score."""
    n = state.num_players
    if state.phase is Phase.MATCH_OVER:
        head = f"match over: scores {list(state.scores)}, ranks {list(state.ranks())}"
    elif state.phase is Phase.ROTATION:
        pending = ", ".join(names[s] for s in state.pending_rotations())
        head = (f"round {state.round_index + 1}/{state.num_rounds}: choosing rotations "
                f"(still to choose: {pending})")
    else:
        seat = state.current_seat
        assert seat is not None
        head = f"round {state.round_index + 1}/{state.num_rounds}: {names[seat]} to act"
    owner = state.active_owner
    lines = [head, f"active set: {_cards(state.active_set)}"
             + (f" (shown by {names[owner]})" if owner is not None else "")]
    if state.last_action is not None:
        lines.append(f"last: {state.last_action}")
    width = max(len(name) for name in names)
    for seat in range(n):
        token = " S&S" if state.scout_show_tokens[seat] and n > 2 else ""
        lines.append(f"{names[seat]:<{width}}  hand {_cards(state.hand(seat))}  "
                     f"captured {len(state.captured[seat])}  chips "
                     f"{state.scout_chips[seat]}{token}  score {state.scores[seat]}")
    return "\n".join(lines)
