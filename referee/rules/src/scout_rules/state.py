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
from .cards import Card, Hand, deal_match, face_of, player_count_rules
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
    scouted_card,
)
from .observation import Observation, new_observation
from .position import TWO_PLAYER_SCOUT_CHIPS, Position, check_position, validated_deals
from .rounds import MAX_ROUND_ACTIONS, Phase, RoundEnd, RoundLog, RoundResult, rank_scores

__all__ = ["State"]

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
        return cls._at(position)

    @classmethod
    def _at(cls, p: Position) -> State:
        """`from_position` for a position known to be valid (an information set's fill)."""
        return _state_at(cls.__new__(cls), p)

    def position(self) -> Position:
        """The round in play as a `Position` (`from_position` of it plays on exactly as this
        state does). Raises OutOfTurn once the match is over."""
        return _position_of(self)

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
        if self.phase is not Phase.ROTATION:
            return ()
        return tuple(s for s, r in enumerate(self.round_logs[-1].rotations) if r is None)

    def ranks(self, forfeited: Iterable[int] = ()) -> tuple[int, ...]:
        return rank_scores(self.scores, forfeited)

    def observation(self, seat: int) -> Observation:
        n = self.num_players
        if not 0 <= seat < n:
            raise MalformedAction(f"seat {seat} does not exist in a {n}-player match")
        return new_observation(
            seat, n, self.rules.rounds, self.round_index, self.starting_seat, self.phase,
            Hand(self.hands[seat]), self.round_logs[-1].rotations[seat] is not None,
            tuple(map(len, self.hands)), tuple(self.active), self.active_owner,
            tuple(map(len, self.captured)), tuple(self.scout_chips),
            tuple(self.scout_show_tokens), tuple(self.scores), self.current_seat,
            tuple(self.history))

    # ----- move generation -----------------------------------------------------------------

    def _acting(self) -> int:
        if self.phase is not Phase.PLAY or self.current_seat is None:
            if self.phase is Phase.ROTATION:
                raise OutOfTurn(
                    f"round {self.round_index + 1} has not started: seats "
                    f"{list(self.pending_rotations())} must still choose their rotation"
                )
            raise OutOfTurn("the match is over; no more actions are taken")
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
            self._check_scout_allowed(seat)
        elif isinstance(action, ScoutAndShow):
            scout = check_scout_shape(action.scout, hand_size)
            show = check_show_shape(action.show, hand_size + 1)
            if self.num_players == 2:
                raise IllegalAction("Scout & Show is not part of the 2-player game")
            if not self.scout_show_tokens[seat]:
                raise IllegalAction("you have already used your Scout & Show this round")
            self._check_scout_allowed(seat)
            card = scouted_card(self.active, scout)
            faces = self.faces[seat]
            new_faces = [*faces[: scout.insert_at], card.face, *faces[scout.insert_at :]]
            rest = self.active_faces[1:] if scout.end == End.LEFT else self.active_faces[:-1]
            check_show(new_faces, show, rest)
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

    def _check_scout_allowed(self, seat: int) -> None:
        if not self.active:
            raise IllegalAction("there is no active set to scout from; you must Show")
        if self.num_players == 2 and self.scout_chips[seat] == 0:
            raise IllegalAction("you have spent all 3 Scout chips this round; you must Show")

    # ----- transitions ----------------------------------------------------------------------

    def choose_rotation(self, seat: int, rotate: bool) -> None:
        """Record one seat's secret choice; when every seat has chosen, the round's play starts."""
        self._checked = None
        if self.phase is not Phase.ROTATION:
            raise OutOfTurn("rotation is chosen only before a round's first turn")
        if not 0 <= seat < self.num_players:
            raise MalformedAction(
                f"seat {seat} does not exist in a {self.num_players}-player match")
        if not isinstance(rotate, bool):
            raise MalformedAction(f"a rotation choice is true or false, got {rotate!r}")
        rotations = self.round_logs[-1].rotations
        if rotations[seat] is not None:
            raise OutOfTurn(f"seat {seat} has already chosen its rotation this round")
        rotations[seat] = rotate
        if rotate:
            self.hands[seat] = list(Hand(self.hands[seat]).rotated())
            self.faces[seat] = list(map(face_of, self.hands[seat]))
        if all(r is not None for r in rotations):
            self.phase = Phase.PLAY
            self.current_seat = self.starting_seat

    def apply(self, action: Action) -> None:
        """Check ``action`` for the seat to act and play it; on any error nothing changes."""
        if action is None or action is not self._checked:
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
            self._publish(PublicAction(seat, ActionKind.SCOUT, (card,), end=End(action.end),
                                       insert_at=action.insert_at))
            if self.num_players == 2:
                self.scout_chips[seat] -= 1
                if not self.scout_chips[seat] and not has_show(self.faces[seat], self.active_key):
                    self._end_round(RoundEnd.NO_LEGAL_MOVE, self.last_shower)
            else:
                self.scouts_since_show += 1
                if self.scouts_since_show == self.num_players - 1:
                    self._end_round(RoundEnd.UNBEATEN_SHOW, self.last_shower)
                else:
                    self.current_seat = (seat + 1) % self.num_players
        else:
            self.scout_show_tokens[seat] = False
            card = self._scout(seat, action.scout)
            self._show(seat, action.show, (card, action.scout))
        if round_log.result is None and self.round_actions >= self.max_round_actions:
            self._end_round(RoundEnd.ACTION_LIMIT, None)

    def _publish(self, action: PublicAction) -> None:
        self.history.append(action)
        self.last_action = action

    def _scout(self, seat: int, scout: Scout) -> Card:
        """Move the card into the hand; returns it as it lay on the table (the public view)."""
        card = scouted_card(self.active, scout)
        on_table = self.active[0] if scout.end == End.LEFT else self.active[-1]
        if scout.end == End.LEFT:
            del self.active[0]
            del self.active_faces[0]
        else:
            self.active.pop()
            self.active_faces.pop()
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
            self._publish(PublicAction(seat, ActionKind.SHOW, tuple(played), start,
                                       show.length))
        else:
            card, scout = scouted
            self._publish(PublicAction(seat, ActionKind.SCOUT_AND_SHOW, (card, *played), start,
                                       show.length, End(scout.end), scout.insert_at))
        if not hand:
            self._end_round(RoundEnd.HAND_EMPTIED, None)
            return
        nxt = (seat + 1) % self.num_players
        self.current_seat = nxt
        if (self.num_players == 2 and not self.scout_chips[nxt]
                and not has_show(self.faces[nxt], self.active_key)):
            self._end_round(RoundEnd.NO_LEGAL_MOVE, seat)

    def _end_round(self, reason: RoundEnd, exempt: int | None) -> None:
        n = self.num_players
        captured = tuple(len(c) for c in self.captured)
        chips = tuple(self.scout_chips)
        scores = tuple(
            captured[s] + chips[s] - (0 if s == exempt else len(self.hands[s])) for s in range(n)
        )
        result = RoundResult(self.round_index, reason, exempt, captured, chips,
                             tuple(Hand(h) for h in self.hands), scores, tuple(self.active),
                             self.active_owner, tuple(self.scout_show_tokens))
        self.round_results.append(result)
        self.round_logs[-1].result = result
        for s in range(n):
            self.scores[s] += scores[s]
        if self.round_index < self.last_round:
            self._start_round(self.round_index + 1)
        else:
            self.phase = Phase.MATCH_OVER
            self.current_seat = None

    # ----- copies and invariants ------------------------------------------------------------

    def clone(self) -> State:
        """An independent deep copy (hands, logs and counters), for search and what-ifs."""
        return _copy(self, State.__new__(State))

    def cards_in_play(self) -> list[tuple[int, int]]:
        """Every card of this round wherever it is (hands, captured, active), as deck pairs."""
        out = [c.pair for h in self.hands for c in h]
        out += [c.pair for cs in self.captured for c in cs]
        out += [c.pair for c in self.active]
        return out


def _state_at(state: State, p: Position) -> State:
    """Every slot of ``state`` set from ``p`` (already checked)."""
    n = p.num_players
    state.rules = player_count_rules(n)
    state.num_players = n
    state.seed = None
    rotations: list[bool | None] = list(p.rotations) if p.rotations else [False] * n
    dealt: tuple[Hand, ...] = ()
    if p.phase is Phase.ROTATION:
        dealt = tuple(Hand(h).rotated() if r else Hand(h)
                      for h, r in zip(p.hands, rotations, strict=True))
        if not p.rotations:
            rotations = [None] * n
    later = tuple(tuple(Hand(h) for h in deal) for deal in p.later_deals) if p.later_deals \
        else ()
    state.deals = ((),) * p.round_index + (dealt,) + later
    state.last_round = p.round_index + len(later)
    state.round_logs = [RoundLog(p.round_index, p.starting_seat, dealt, rotations, [])]
    state.round_results = []
    state.scores = list(p.scores)
    state.last_action = p.history[-1] if p.history else None
    state._checked = None
    state.round_index = p.round_index
    state.starting_seat = p.starting_seat
    state.phase = p.phase
    state.hands = [list(h) for h in p.hands]
    state.faces = [list(map(face_of, h)) for h in p.hands]
    state.active = list(p.active_set)
    state.active_faces = [c.face for c in p.active_set]
    state.active_key = group_key(state.active_faces) if p.active_set else NO_ACTIVE_SET
    state.last_shower = p.active_owner
    state.scouts_since_show = p.scouts_since_show
    state.captured = [list(c) for c in p.captured]
    state.scout_chips = list(p.scout_chips)
    state.scout_show_tokens = list(p.scout_show_tokens)
    state.current_seat = p.current_seat
    state.history = list(p.history)
    state.round_actions = p.round_actions
    return state


def _position_of(source: State) -> Position:
    """`State.position`."""
    if source.phase is Phase.MATCH_OVER:
        raise OutOfTurn("the match is over: there is no round in play")
    log = source.round_logs[-1]
    return Position(
        num_players=source.num_players,
        round_index=source.round_index,
        phase=source.phase,
        hands=tuple(Hand(h) for h in source.hands),
        captured=tuple(tuple(c) for c in source.captured),
        scout_chips=tuple(source.scout_chips),
        scout_show_tokens=tuple(source.scout_show_tokens),
        scores=tuple(source.scores),
        current_seat=source.current_seat,
        active_set=tuple(source.active),
        active_owner=source.active_owner,
        scouts_since_show=source.scouts_since_show,
        rotations=tuple(log.rotations),
        history=tuple(source.history),
        actions_played=source.round_actions,
        later_deals=source.deals[source.round_index + 1:source.last_round + 1],
    )


def _copy(source: State, other: State) -> State:
    """Every slot of ``other`` from ``source``: the immutable values shared, the lists copied."""
    other.rules = source.rules
    other.num_players = source.num_players
    other.seed = source.seed
    other.deals = source.deals
    other.last_round = source.last_round
    other.round_logs = [
        RoundLog(log.round_index, log.starting_seat, log.dealt_hands, list(log.rotations),
                 list(log.actions), log.result)
        for log in source.round_logs
    ]
    other.round_results = list(source.round_results)
    other.scores = list(source.scores)
    other.last_action = source.last_action
    other._checked = source._checked
    other.round_index = source.round_index
    other.starting_seat = source.starting_seat
    other.phase = source.phase
    other.hands = [list(h) for h in source.hands]
    other.faces = [list(f) for f in source.faces]
    other.active = list(source.active)
    other.active_faces = list(source.active_faces)
    other.active_key = source.active_key
    other.last_shower = source.last_shower
    other.scouts_since_show = source.scouts_since_show
    other.captured = [list(c) for c in source.captured]
    other.scout_chips = list(source.scout_chips)
    other.scout_show_tokens = list(source.scout_show_tokens)
    other.current_seat = source.current_seat
    other.history = list(source.history)
    other.round_actions = source.round_actions
    return other
