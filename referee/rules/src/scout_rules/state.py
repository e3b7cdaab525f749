"""The game state of one SCOUT match: rotation choices, turns, round ends, scoring and ranks.

`State` is mutable in the way of python-chess's ``Board``: `apply` changes it in place after the
action has been checked in full, so a rejected action leaves it exactly as it was; `clone` gives
an independent copy for search. Everything a seat may know is exposed only through
`observation`, which is built from public counters and that seat's own hand. A state is made by
`State.new` (a seeded deal), `State.from_deals` (an explicit deal) or `State.from_position`
(any reachable moment of a round, checked); `position` gives that moment back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from .actions import Action, ActionKind, End, PublicAction, Scout, ScoutAndShow, Show
from .cards import Card, Hand, card_of, deal_match, player_count_rules
from .errors import IllegalAction, MalformedAction, OutOfTurn
from .moves import (
    NO_ACTIVE_SET,
    check_scout_shape,
    check_show,
    check_show_shape,
    group_key,
    has_scout_and_show,
    has_show,
    legal_scout_and_shows,
    legal_scouts,
    legal_shows,
)
from .observation import Observation
from .position import TWO_PLAYER_SCOUT_CHIPS, Position, check_position, validated_deals
from .rounds import MAX_ROUND_ACTIONS, Phase, RoundEnd, RoundLog, RoundResult, rank_scores
from .snapshots import copy_state, position_of, state_at
from .transitions import cards_in_play as _cards_in_play
from .transitions import (
    check_scout_allowed,
    check_scout_and_show,
    end_round,
    not_acting,
    observation_of,
    pending_rotations,
    plainly_legal_scout_and_show,
)
from .transitions import choose_rotation as _choose_rotation

__all__ = ["State"]

_LEFT, _RIGHT = End.LEFT, End.RIGHT
_ENDS = (End.LEFT, End.RIGHT)
_new_public = tuple.__new__
"""Builds a `PublicAction` from all its fields without the named tuple's Python-level
``__new__`` (the engine's own values, in field order)."""

_MATCH_SLOTS = ("rules", "num_players", "seed", "deals", "last_round", "round_logs",
                "round_results", "scores", "last_action", "_checked")
_ROUND_SLOTS = ("round_index", "starting_seat", "phase", "hands", "faces", "active",
                "active_faces", "active_key", "last_shower", "scouts_since_show", "captured",
                "scout_chips", "scout_show_tokens", "current_seat", "history", "round_actions")


class State:
    """One match of SCOUT from the deal to the final ranks.

    Every attribute is a slot, and each constructor sets every one (a test holds them to it):
    a field added here and forgotten in `from_position` or `clone` fails at once."""

    __slots__ = _MATCH_SLOTS + _ROUND_SLOTS

    #: Decision (docs/rules.md): the most actions a round has; see `rounds.MAX_ROUND_ACTIONS`.
    max_round_actions: ClassVar[int] = MAX_ROUND_ACTIONS

    _checked: Action | None
    """The action `check` last found legal, until the state next changes: `apply` of that
    very action does not check it again (a referee checks an answer, then plays it)."""

    def __init__(self, num_players: int, deals: Sequence[Sequence[Sequence[Card]]],
                 seed: int | None = None) -> None:
        """Prefer `State.new` (seeded) or `State.from_deals` (explicit deal)."""
        self._set_up(num_players, validated_deals(num_players, deals), seed)

    def _set_up(self, num_players: int, deals: tuple[tuple[Hand, ...], ...],
                seed: int | None) -> None:
        self.rules = player_count_rules(num_players)
        self.num_players = num_players
        self.seed = seed
        self.deals: tuple[tuple[Hand, ...], ...] = deals
        self.last_round = self.rules.rounds - 1
        self.round_logs: list[RoundLog] = []
        self.round_results: list[RoundResult] = []
        self.scores: list[int] = [0] * num_players
        self.last_action: PublicAction | None = None
        self._checked = None
        self._start_round(0)

    @classmethod
    def new(cls, num_players: int, seed: int) -> State:
        """A match dealt from a 64-bit seed by the documented algorithm (see docs/rules.md).
        The deal is the engine's own, so it is not validated as a given one is (which cost as
        much as dealing)."""
        state = cls.__new__(cls)
        state._set_up(num_players, tuple(map(tuple, deal_match(num_players, seed))), seed)
        return state

    @classmethod
    def from_deals(cls, num_players: int, deals: Sequence[Sequence[Sequence[Card]]]) -> State:
        """A match with explicit dealt hands, ``deals[round][seat]``, before rotation."""
        return cls(num_players, deals)

    @classmethod
    def from_position(cls, position: Position) -> State:
        """The match from ``position`` on: `BadShape`, `CardsDontAddUp` or `InconsistentTable`
        (all `InvalidPosition`) unless play can reach it. The state's logs start there: its
        round log holds the actions played from then on, and rounds before are not known."""
        check_position(position)
        return state_at(cls.__new__(cls), position)

    def position(self) -> Position:
        """The round in play as a `Position` (`from_position` of it plays on exactly as this
        state does). Raises OutOfTurn once the match is over."""
        return position_of(self)

    def _start_round(self, round_index: int) -> None:
        n = self.num_players
        self.round_index = round_index
        self.starting_seat = round_index % n
        dealt = self.deals[round_index]
        self.phase = Phase.ROTATION
        self.hands: list[list[Card]] = [list(h) for h in dealt]
        self.faces: list[list[int]] = [[c.face for c in h] for h in dealt]
        self.active: list[Card] = []
        self.active_faces: list[int] = []
        self.active_key = NO_ACTIVE_SET
        self.last_shower: int | None = None
        self.scouts_since_show = 0
        self.captured: list[list[Card]] = [[] for _ in range(n)]
        self.scout_chips: list[int] = [TWO_PLAYER_SCOUT_CHIPS if n == 2 else 0] * n
        self.scout_show_tokens: list[bool] = [n > 2] * n
        self.current_seat: int | None = None
        self.history: list[PublicAction] = []
        self.round_actions = 0
        self.round_logs.append(RoundLog(round_index, self.starting_seat, dealt, [None] * n, []))

    # ----- queries -------------------------------------------------------------------------

    @property
    def num_rounds(self) -> int:
        return self.rules.rounds

    @property
    def is_over(self) -> bool:
        return self.phase is Phase.MATCH_OVER

    def hand(self, seat: int) -> Hand:
        """A seat's full hand. Referee-side only: bots get `observation`."""
        return Hand(self.hands[seat])

    @property
    def active_set(self) -> tuple[Card, ...]:
        return tuple(self.active)

    @property
    def active_owner(self) -> int | None:
        return self.last_shower if self.active else None

    def pending_rotations(self) -> tuple[int, ...]:
        """Seats that still have to choose whether to rotate their hand this round."""
        return pending_rotations(self)

    def ranks(self, forfeited: Iterable[int] = ()) -> tuple[int, ...]:
        return rank_scores(self.scores, forfeited)

    def observation(self, seat: int) -> Observation:
        return observation_of(self, seat)

    # ----- move generation -----------------------------------------------------------------

    def _acting(self) -> int:
        if self.phase is not Phase.PLAY or self.current_seat is None:
            raise not_acting(self)
        return self.current_seat

    def legal_shows(self) -> list[Show]:
        seat = self._acting()
        return legal_shows(self.faces[seat], self.active_key)

    def legal_scouts(self) -> list[Scout]:
        seat = self._acting()
        if not self.active or (self.num_players == 2 and self.scout_chips[seat] == 0):
            return []
        return legal_scouts(len(self.hands[seat]), len(self.active))

    def can_scout_and_show(self) -> bool:
        seat = self._acting()
        return self.scout_show_tokens[seat] and has_scout_and_show(self.faces[seat], self.active)

    def legal_scout_and_shows(self) -> list[ScoutAndShow]:
        seat = self._acting()
        if not self.scout_show_tokens[seat] or not self.active:
            return []
        return legal_scout_and_shows(self.faces[seat], self.active)

    def legal_actions(self) -> list[Action]:
        """Every legal action of the seat to act: Shows, then Scouts, then Scout & Shows."""
        return [*self.legal_shows(), *self.legal_scouts(), *self.legal_scout_and_shows()]

    def check(self, action: Action) -> None:
        """Raise MalformedAction / IllegalAction / OutOfTurn unless ``action`` is legal now.

        Costs a few comparisons: nothing is enumerated."""
        seat = self._acting()
        hand_size = len(self.hands[seat])
        if isinstance(action, Show):
            show = check_show_shape(action, hand_size)
            check_show(self.faces[seat], show, self.active_faces)
        elif isinstance(action, Scout):
            check_scout_shape(action, hand_size)
            check_scout_allowed(self, seat)
        elif isinstance(action, ScoutAndShow):
            scout = check_scout_shape(action.scout, hand_size)
            show = check_show_shape(action.show, hand_size + 1)
            check_scout_and_show(self, seat, scout, show)
        else:
            raise MalformedAction(
                f"an action is a Show, a Scout or a ScoutAndShow, not {type(action).__name__}"
            )
        self._checked = action

    def is_legal(self, action: Action) -> bool:
        try:
            self.check(action)
        except (IllegalAction, MalformedAction, OutOfTurn):
            return False
        return True

    # ----- transitions ----------------------------------------------------------------------

    def choose_rotation(self, seat: int, rotate: bool) -> None:
        """Record one seat's secret choice; when every seat has chosen, the round's play starts."""
        _choose_rotation(self, seat, rotate)

    def _plainly_legal(self, action: Action) -> bool:
        """True when ``action`` is a well-formed, legal action of the engine's own types (what
        a search or the move generators hand in): `check`'s verdict in a few comparisons.
        False means only "ask `check`", which accepts the rest or says what is wrong."""
        seat = self.current_seat
        if seat is None or self.phase is not Phase.PLAY:
            return False
        kind = type(action)
        faces = self.faces[seat]
        size = len(faces)
        if kind is Show:
            start, length = action  # type: ignore[misc]
            return (type(start) is int and type(length) is int and length >= 1
                    and start >= 0 and start + length <= size
                    and group_key(faces[start:start + length]) > self.active_key)
        if kind is Scout:
            end, flip, at = action  # type: ignore[misc]
            return ((end is _LEFT or end is _RIGHT) and (flip is True or flip is False)
                    and type(at) is int and 0 <= at <= size and bool(self.active)
                    and (self.num_players != 2 or self.scout_chips[seat] > 0))
        if kind is ScoutAndShow:
            scout, show = action  # type: ignore[misc]
            return plainly_legal_scout_and_show(self, seat, scout, show)
        return False

    def apply(self, action: Action) -> None:
        """Check ``action`` for the seat to act and play it; on any error nothing changes."""
        if (action is not self._checked or action is None) and not self._plainly_legal(action):
            self.check(action)
        self._checked = None
        seat = self.current_seat
        assert seat is not None
        round_log = self.round_logs[-1]
        round_log.actions.append((seat, action))
        self.round_actions += 1
        if isinstance(action, Show):
            self._show(seat, action, None)
        elif isinstance(action, Scout):
            card = self._scout(seat, action)
            self._publish(_new_public(PublicAction, (seat, ActionKind.SCOUT, (card,), None, None,
                                                     _ENDS[action.end], action.insert_at, False)))
            if self.num_players == 2:
                self.scout_chips[seat] -= 1
                if not self.scout_chips[seat] and not has_show(self.faces[seat], self.active_key):
                    end_round(self, RoundEnd.NO_LEGAL_MOVE, self.last_shower)
            else:
                self.scouts_since_show += 1
                if self.scouts_since_show == self.num_players - 1:
                    end_round(self, RoundEnd.UNBEATEN_SHOW, self.last_shower)
                else:
                    self.current_seat = (seat + 1) % self.num_players
        else:
            self.scout_show_tokens[seat] = False
            card = self._scout(seat, action.scout)
            self._show(seat, action.show, (card, action.scout))
        if round_log.result is None and self.round_actions >= self.max_round_actions:
            end_round(self, RoundEnd.ACTION_LIMIT, None)

    def _publish(self, action: PublicAction) -> None:
        self.history.append(action)
        self.last_action = action

    def _scout(self, seat: int, scout: Scout) -> Card:
        """Move the card into the hand; returns it as it lay on the table (the public view)."""
        if scout.end == _LEFT:
            on_table = self.active.pop(0)
            del self.active_faces[0]
        else:
            on_table = self.active.pop()
            self.active_faces.pop()
        card = card_of(on_table.other, on_table.face) if scout.flip else on_table
        self.active_key = group_key(self.active_faces) if self.active else NO_ACTIVE_SET
        self.hands[seat].insert(scout.insert_at, card)
        self.faces[seat].insert(scout.insert_at, card.face)
        if self.num_players > 2:
            assert self.last_shower is not None
            self.scout_chips[self.last_shower] += 1
        return on_table

    def _show(self, seat: int, show: Show, scouted: tuple[Card, Scout] | None) -> None:
        start, stop = show.start, show.start + show.length
        hand = self.hands[seat]
        played = hand[start:stop]
        del hand[start:stop]
        faces = self.faces[seat]
        played_faces = faces[start:stop]
        del faces[start:stop]
        self.captured[seat].extend(self.active)
        self.active = played
        self.active_faces = played_faces
        self.active_key = group_key(played_faces)
        self.last_shower = seat
        self.scouts_since_show = 0
        if scouted is None:
            self._publish(_new_public(PublicAction, (seat, ActionKind.SHOW, tuple(played), start,
                                                     show.length, None, None, False)))
        else:
            card, scout = scouted
            self._publish(_new_public(PublicAction, (
                seat, ActionKind.SCOUT_AND_SHOW, (card, *played), start, show.length,
                _ENDS[scout.end], scout.insert_at, False)))
        if not hand:
            end_round(self, RoundEnd.HAND_EMPTIED, None)
            return
        nxt = (seat + 1) % self.num_players
        self.current_seat = nxt
        if (self.num_players == 2 and not self.scout_chips[nxt]
                and not has_show(self.faces[nxt], self.active_key)):
            end_round(self, RoundEnd.NO_LEGAL_MOVE, seat)

    # ----- copies and invariants ------------------------------------------------------------

    def clone(self) -> State:
        """An independent deep copy (hands, logs and counters), for search and what-ifs."""
        return copy_state(self, State.__new__(State))

    def cards_in_play(self) -> list[tuple[int, int]]:
        """Every card of this round wherever it is (hands, captured, active), as deck pairs."""
        return _cards_in_play(self)
