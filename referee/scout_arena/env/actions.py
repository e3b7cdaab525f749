"""One flat, fixed-size integer encoding of every decision of a SCOUT match.

Learning libraries want a single ``Discrete(size)`` action space and a mask over it; the engine
speaks `Show`, `Scout`, `ScoutAndShow` and a rotation choice. `ActionCodec` maps one to the other
for a player count, and is shared by the PettingZoo environment and the OpenSpiel game, so an
action id means the same in both. The layout (docs/env.md) with ``H = codec.max_hand`` and
``L = MAX_GROUP``::

    0                         keep the hand as dealt           (rotation phase)
    1                         rotate the hand 180 degrees      (rotation phase)
    2 + start*L + (length-1)                                   Show(start, length)
    scout_base + (end*2 + flip)*H + insert_at                  Scout(end, flip, insert_at)
    sas_base + scout_part*(H*L) + start*L + (length-1)         ScoutAndShow (3-5 players)

where ``scout_part = (end*2 + flip)*H + insert_at``. ``H`` bounds every hand position: while a
round is played every other seat holds at least one card, so no hand ever holds more than the
round's cards less one per other seat, and a hand that Scouts holds one card fewer still (the
active set is not empty). ``L = 10`` bounds a group: a run climbs through at most the ten
values, and a set has at most nine cards (a value is on nine cards).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from scout_rules import Action, End, Scout, ScoutAndShow, Show, player_count_rules

MAX_GROUP = 10
"""The longest possible Show: a run of all ten values (a set has at most nine cards)."""

KEEP, ROTATE = 0, 1
SHOW_BASE = 2


class Rotation(NamedTuple):
    """A seat's choice before a round's first turn: keep the hand, or turn it 180 degrees."""

    rotate: bool

    def __str__(self) -> str:
        return "rotate the hand" if self.rotate else "keep the hand"


Decision = Rotation | Action
"""Anything a seat decides: its rotation choice, or a turn's action."""


def round_cards(num_players: int) -> int:
    """Cards in play in one round: the 2-player match splits its 44 cards over two rounds."""
    rules = player_count_rules(num_players)
    return rules.hand_size * num_players


def max_hand(num_players: int) -> int:
    """The most cards a hand can hold while a round is played (see the module docstring)."""
    return round_cards(num_players) - (num_players - 1)


class ActionCodec:
    """Action ids for one player count: `encode`, `decode`, and what each range means."""

    __slots__ = ("max_hand", "num_players", "sas_base", "scout_base", "size")

    def __init__(self, num_players: int) -> None:
        self.num_players = num_players
        self.max_hand = h = max_hand(num_players)
        self.scout_base = SHOW_BASE + h * MAX_GROUP
        self.sas_base = self.scout_base + 4 * h
        scout_and_shows = 4 * h * h * MAX_GROUP if num_players > 2 else 0
        self.size = self.sas_base + scout_and_shows

    # ----- encode -------------------------------------------------------------------------

    def _show_part(self, show: Show) -> int:
        start, length = show.start, show.length
        if not (0 <= start < self.max_hand and 1 <= length <= MAX_GROUP):
            raise ValueError(f"{show!r} is outside the encodable hand of {self.max_hand} cards "
                             f"and groups of at most {MAX_GROUP}")
        return start * MAX_GROUP + length - 1

    def _scout_part(self, scout: Scout) -> int:
        if not 0 <= scout.insert_at < self.max_hand:
            raise ValueError(f"{scout!r} inserts outside the encodable positions "
                             f"0-{self.max_hand - 1}")
        return (int(scout.end) * 2 + int(scout.flip)) * self.max_hand + scout.insert_at

    def encode(self, decision: Decision) -> int:
        """The id of a decision; ValueError if it has no id (out of range, or Scout & Show in a
        2-player game)."""
        if isinstance(decision, Rotation):
            return ROTATE if decision.rotate else KEEP
        if isinstance(decision, Show):
            return SHOW_BASE + self._show_part(decision)
        if isinstance(decision, Scout):
            return self.scout_base + self._scout_part(decision)
        if self.num_players == 2:
            raise ValueError("Scout & Show is not part of the 2-player game")
        return (self.sas_base + self._scout_part(decision.scout) * self.max_hand * MAX_GROUP
                + self._show_part(decision.show))

    def encode_all(self, decisions: Iterable[Decision]) -> list[int]:
        """Ids of many decisions, ascending (the order OpenSpiel wants legal actions in)."""
        return sorted(self.encode(d) for d in decisions)

    # ----- decode -------------------------------------------------------------------------

    def _show(self, part: int) -> Show:
        return Show(part // MAX_GROUP, part % MAX_GROUP + 1)

    def _scout(self, part: int) -> Scout:
        kind, insert_at = divmod(part, self.max_hand)
        return Scout(End(kind // 2), bool(kind % 2), insert_at)

    def decode(self, action_id: int) -> Decision:
        """The decision an id stands for; ValueError outside ``0 <= id < size``. The map is a
        bijection: a Show id whose slice runs past ``max_hand`` decodes too, and is never legal."""
        if not 0 <= action_id < self.size:
            raise ValueError(f"action id {action_id} is outside 0-{self.size - 1}")
        if action_id < SHOW_BASE:
            return Rotation(action_id == ROTATE)
        if action_id < self.scout_base:
            return self._show(action_id - SHOW_BASE)
        if action_id < self.sas_base:
            return self._scout(action_id - self.scout_base)
        scout_part, show_part = divmod(action_id - self.sas_base, self.max_hand * MAX_GROUP)
        return ScoutAndShow(self._scout(scout_part), self._show(show_part))

    def kind(self, action_id: int) -> str:
        """'rotation', 'show', 'scout' or 'scout_and_show': which range an id falls in."""
        if action_id < SHOW_BASE:
            return "rotation"
        if action_id < self.scout_base:
            return "show"
        return "scout" if action_id < self.sas_base else "scout_and_show"
