"""Cards and actions between the rules package and scout.v1 messages, in both directions.

The referee sends cards and public actions and reads bots' actions; a bot does the opposite.
Both sides speak the rules package's types, so the mapping is written once, here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from scout.v1 import game_pb2
from scout_rules import (
    Action,
    ActionKind,
    Card,
    End,
    MalformedAction,
    PublicAction,
    Scout,
    ScoutAndShow,
    Show,
)

_K = TypeVar("_K")
_V = TypeVar("_V")


def inverse(mapping: dict[_K, _V]) -> dict[_V, _K]:
    return {value: key for key, value in mapping.items()}


END_TO_PROTO: dict[End, game_pb2.End.ValueType] = {
    End.LEFT: game_pb2.END_LEFT,
    End.RIGHT: game_pb2.END_RIGHT,
}
END_FROM_PROTO = inverse(END_TO_PROTO)
"""END_UNSPECIFIED is absent: a Scout without an end is malformed, a public action's end None."""

KIND_FROM_PROTO: dict[game_pb2.ActionKind.ValueType, ActionKind] = {
    game_pb2.ACTION_KIND_UNSPECIFIED: ActionKind.UNSPECIFIED,
    game_pb2.ACTION_KIND_SHOW: ActionKind.SHOW,
    game_pb2.ACTION_KIND_SCOUT: ActionKind.SCOUT,
    game_pb2.ACTION_KIND_SCOUT_AND_SHOW: ActionKind.SCOUT_AND_SHOW,
}
KIND_TO_PROTO = inverse(KIND_FROM_PROTO)


# --- cards ---------------------------------------------------------------------------------------

CARD_PROTO = {
    (a, b): game_pb2.Card(face=a, other=b) for a in range(1, 11) for b in range(1, 11) if a != b
}
"""The message of every card of the deck, immutable by convention: a repeated field copies it,
so a request (some fifty cards) builds none."""

_CARDS: dict[tuple[int, int], Card] = {}
"""Every card read so far, made once: a Card is immutable, so one object serves every hand and
history it appears in."""
_CACHED_VALUES = range(0, 16)


def card_to_proto(card: Card) -> game_pb2.Card:
    """A new message (the caller may change it); `cards_to_proto` shares `CARD_PROTO`'s."""
    return game_pb2.Card(face=card.face, other=card.other)


def cards_to_proto(cards: Iterable[Card]) -> list[game_pb2.Card]:
    table = CARD_PROTO
    return [table.get(c) or game_pb2.Card(face=c.face, other=c.other) for c in cards]


def card_from_proto(card: game_pb2.Card) -> Card:
    key = (card.face, card.other)
    made = _CARDS.get(key)
    if made is None:
        made = Card(*key)
        if key[0] in _CACHED_VALUES and key[1] in _CACHED_VALUES:  # bounded, whatever comes
            _CARDS[key] = made
    return made


def cards_from_proto(cards: Iterable[game_pb2.Card]) -> tuple[Card, ...]:
    return tuple(card_from_proto(card) for card in cards)


# --- actions -------------------------------------------------------------------------------------


def show_to_proto(show: Show) -> game_pb2.Show:
    return game_pb2.Show(start=show.start, length=show.length)


def show_from_proto(show: game_pb2.Show) -> Show:
    return Show(show.start, show.length)


def scout_to_proto(scout: Scout) -> game_pb2.Scout:
    return game_pb2.Scout(end=END_TO_PROTO[scout.end], flip=scout.flip, insert_at=scout.insert_at)


def scout_from_proto(scout: game_pb2.Scout) -> Scout:
    """MalformedAction (a ValueError) for a Scout without an end: the referee tells the bot
    this reason, so its words are part of the wire."""
    end = END_FROM_PROTO.get(scout.end)
    if end is None:
        raise MalformedAction("a Scout must name its end: END_LEFT or END_RIGHT")
    return Scout(end, scout.flip, scout.insert_at)


def action_to_proto(action: Action) -> game_pb2.Action:
    if isinstance(action, Show):
        return game_pb2.Action(show=show_to_proto(action))
    if isinstance(action, Scout):
        return game_pb2.Action(scout=scout_to_proto(action))
    return game_pb2.Action(
        scout_and_show=game_pb2.ScoutAndShow(
            scout=scout_to_proto(action.scout), show=show_to_proto(action.show)
        )
    )


def action_from_proto(action: game_pb2.Action) -> Action:
    """The action an ActionChoice carries; MalformedAction if it cannot be read."""
    kind = action.WhichOneof("kind")
    if kind == "show":
        return show_from_proto(action.show)
    if kind == "scout":
        return scout_from_proto(action.scout)
    if kind == "scout_and_show":
        both = action.scout_and_show
        if not both.HasField("scout") or not both.HasField("show"):
            raise MalformedAction("a ScoutAndShow needs both its scout and its show part")
        return ScoutAndShow(scout_from_proto(both.scout), show_from_proto(both.show))
    raise MalformedAction("the action is empty: set one of show, scout or scout_and_show")


def public_action_to_proto(action: PublicAction, by_referee: bool = False) -> game_pb2.PublicAction:
    """``by_referee`` is the caller's to say (the engine never sets the action's own): the
    referee knows which actions were its fallbacks."""
    msg = game_pb2.PublicAction(
        seat=action.seat,
        kind=KIND_TO_PROTO[action.kind],
        cards=cards_to_proto(action.cards),
        by_referee=by_referee,
    )
    if action.start is not None:
        msg.start = action.start
    if action.length is not None:
        msg.length = action.length
    if action.end is not None:
        msg.end = END_TO_PROTO[action.end]
    if action.insert_at is not None:
        msg.insert_at = action.insert_at
    return msg


_SHOWS = (ActionKind.SHOW, ActionKind.SCOUT_AND_SHOW)
_SCOUTS = (ActionKind.SCOUT, ActionKind.SCOUT_AND_SHOW)


def public_action_from_proto(action: game_pb2.PublicAction) -> PublicAction:
    """Fields that do not apply to the action's kind become None (the wire carries zeros)."""
    kind = KIND_FROM_PROTO.get(action.kind, ActionKind.UNSPECIFIED)
    shows = kind in _SHOWS or kind is ActionKind.UNSPECIFIED
    scouts = kind in _SCOUTS or kind is ActionKind.UNSPECIFIED
    return PublicAction(
        seat=action.seat,
        kind=kind,
        cards=cards_from_proto(action.cards),
        start=action.start if shows else None,
        length=action.length if shows else None,
        end=END_FROM_PROTO.get(action.end) if scouts else None,
        insert_at=action.insert_at if scouts else None,
        by_referee=action.by_referee,
    )


# --- a seat's view -------------------------------------------------------------------------------


class SeatView(Protocol):
    """What an Observation message carries: the engine's `scout_rules.Observation` and the
    SDK's both have it, so one function writes the message for the referee and a fake one."""

    @property
    def seat(self) -> int: ...
    @property
    def num_players(self) -> int: ...
    @property
    def round_index(self) -> int: ...
    @property
    def num_rounds(self) -> int: ...
    @property
    def starting_seat(self) -> int: ...
    @property
    def hand(self) -> Sequence[Card]: ...
    @property
    def hand_sizes(self) -> Sequence[int]: ...
    @property
    def active_set(self) -> Sequence[Card]: ...
    @property
    def active_owner(self) -> int | None: ...
    @property
    def captured_counts(self) -> Sequence[int]: ...
    @property
    def scout_chips(self) -> Sequence[int]: ...
    @property
    def scout_show_tokens(self) -> Sequence[bool]: ...
    @property
    def scores(self) -> Sequence[int]: ...
    @property
    def current_seat(self) -> int | None: ...
    @property
    def history(self) -> Sequence[PublicAction]: ...


def observation_to_proto(
    view: SeatView, match_id: str, history: Sequence[game_pb2.PublicAction] | None = None
) -> game_pb2.Observation:
    """``history``: the round's actions already converted (the referee keeps them as it
    broadcasts, so a long round does not reconvert every action at every decision); by
    default the view's own, none of them marked as the referee's."""
    msg = game_pb2.Observation(
        match_id=match_id,
        seat=view.seat,
        num_players=view.num_players,
        round_index=view.round_index,
        num_rounds=view.num_rounds,
        starting_seat=view.starting_seat,
        hand=cards_to_proto(view.hand),
        hand_sizes=view.hand_sizes,
        active_set=cards_to_proto(view.active_set),
        captured_counts=view.captured_counts,
        scout_chips=view.scout_chips,
        scout_show_tokens=view.scout_show_tokens,
        scores=view.scores,
        current_seat=view.current_seat if view.current_seat is not None else -1,
        history=history
        if history is not None
        else [public_action_to_proto(a) for a in view.history],
    )
    if view.active_owner is not None:
        msg.active_owner = view.active_owner
    return msg
