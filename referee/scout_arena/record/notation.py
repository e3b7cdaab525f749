"""One wording for a move, wherever a match is shown: the live view, the replay viewer and
`scout-arena replay` / `play` all describe a turn through these functions, so that a move read
in one reads the same in the others.

A move is worded from what the whole table saw (`PublicAction`): who acted, the card taken and
from which end, where it went in, the group shown and how many cards it captured. A replay
knows one thing more, which way up a scouted card went in; it is added as "(turned to N)" and
the rest of the sentence is the same. Seats are called by their bot's name; a name that two
seats share gets its seat number, and a seat without a name is "seat N".
"""

from __future__ import annotations

from collections.abc import Sequence

from scout_rules import Action, ActionKind, Card, End, PublicAction, Scout, Show
from scout_rules.moves import scouted_card


def seat_labels(players: Sequence[str]) -> list[str]:
    """What each seat is called in a move: its bot's name, told apart by seat when two seats
    have the same name (self-play), "seat N" when there is no name."""
    labels = []
    for seat, name in enumerate(players):
        if not name:
            labels.append(f"seat {seat}")
        elif list(players).count(name) > 1:
            labels.append(f"{name} (seat {seat})")
        else:
            labels.append(name)
    return labels


def faces(cards: Sequence[Card]) -> str:
    """A group's faces as read on the table, left to right: "8-7-6"."""
    return "-".join(str(c.face) for c in cards)


def _scout_words(card: Card, end: End | None, insert_at: int | None, turned_to: int | None) -> str:
    side = "left" if end == End.LEFT else "right"
    turned = f" (turned to {turned_to})" if turned_to is not None else ""
    return f"scouts {card.face} from the {side} end into position {insert_at}{turned}"


def _show_words(cards: Sequence[Card], captured: int) -> str:
    capture = f", capturing {captured}" if captured else ""
    return f"shows {faces(cards)}{capture}"


def describe_public(
    label: str, action: PublicAction, captured: int, turned_to: int | None = None
) -> str:
    """One move as the table saw it. ``captured``: the size of the active set a Show beat (0
    when the table was clear or the move was a plain Scout); ``turned_to``: the face a scouted
    card was turned to, when the describer knows it (a replay does, a spectator does not)."""
    by_referee = " (played by the referee: no answer in time)" if action.by_referee else ""
    if action.kind is ActionKind.SHOW:
        return f"{label} {_show_words(action.cards, captured)}{by_referee}"
    scout = _scout_words(action.cards[0], action.end, action.insert_at, turned_to)
    if action.kind is ActionKind.SCOUT:
        return f"{label} {scout}{by_referee}"
    return (
        f"{label} Scout & Show: {scout}, then {_show_words(action.cards[1:], captured)}{by_referee}"
    )


def describe_round(history: Sequence[PublicAction], players: Sequence[str]) -> list[str]:
    """Every move of a round's public history, in order. The captures are counted from the
    history itself: a Show takes the active set, a Scout takes one card from it."""
    labels = seat_labels(players)
    active = 0
    out = []
    for action in history:
        captured = 0
        if action.kind is ActionKind.SCOUT:
            active = max(active - 1, 0)
        elif action.kind is ActionKind.SCOUT_AND_SHOW:
            captured = max(active - 1, 0)
            active = len(action.cards) - 1
        else:
            captured = active
            active = len(action.cards)
        label = labels[action.seat] if 0 <= action.seat < len(labels) else f"seat {action.seat}"
        out.append(describe_public(label, action, captured))
    return out


def describe_action(
    label: str, hand: Sequence[Card], active: Sequence[Card], action: Action
) -> str:
    """``action`` played from ``hand`` onto ``active``, as `describe_public` words it for the
    same move seen at the table, with the turn of a scouted card said."""
    seat = 0
    if isinstance(action, Show):
        public = PublicAction(
            seat, ActionKind.SHOW, tuple(action_cards(hand, action)), action.start, action.length
        )
        return describe_public(label, public, len(active))
    scout = action if isinstance(action, Scout) else action.scout
    card = active[0] if scout.end == End.LEFT else active[-1]
    taken = scouted_card(active, scout)
    turned_to = taken.face if scout.flip else None
    if isinstance(action, Scout):
        public = PublicAction(
            seat, ActionKind.SCOUT, (card,), end=scout.end, insert_at=scout.insert_at
        )
        return describe_public(label, public, 0, turned_to)
    new_hand = [*hand[: scout.insert_at], taken, *hand[scout.insert_at :]]
    shown = action_cards(new_hand, action.show)
    public = PublicAction(
        seat,
        ActionKind.SCOUT_AND_SHOW,
        (card, *shown),
        action.show.start,
        action.show.length,
        scout.end,
        scout.insert_at,
    )
    return describe_public(label, public, len(active) - 1, turned_to)


def action_cards(hand: Sequence[Card], show: Show) -> list[Card]:
    """The cards a Show takes from ``hand``."""
    return list(hand[show.start : show.start + show.length])
