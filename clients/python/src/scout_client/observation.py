"""What `Bot.act` receives: the seat's view of the table plus the referee's request.

Cards, actions and the group rules are the rules package's (`scout_rules`), the same values the
referee plays with; `information_set` hands a bot the engine itself, set up at this moment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import scout_rules
from scout_rules import (
    Action,
    Card,
    End,
    InformationSet,
    PublicAction,
    Scout,
    ScoutAndShow,
    Show,
    beats,
    groups_in,
)

__all__ = ["Observation"]


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

    @classmethod
    def from_view(cls, view: scout_rules.Observation, *, match_id: str = "",
                  request_id: int = 0, deadline_ms: int = 0,
                  time_bank_ms: int = 0) -> Observation:
        """The request a referee would send for the engine's view of the seat to act: what
        in-process play (`scout-arena play`) and tests hand a bot without any wire."""
        shows, scout_and_show = view.shows_and_scout_and_show()
        return cls(
            match_id=match_id, seat=view.seat, num_players=view.num_players,
            round_index=view.round_index, num_rounds=view.num_rounds,
            starting_seat=view.starting_seat, hand=tuple(view.hand),
            hand_sizes=view.hand_sizes, active_set=view.active_set,
            active_owner=view.active_owner, captured_counts=view.captured_counts,
            scout_chips=view.scout_chips, scout_show_tokens=view.scout_show_tokens,
            scores=view.scores,
            current_seat=view.current_seat if view.current_seat is not None else -1,
            history=view.history, legal_shows=tuple(shows),
            legal_scouts=tuple(view.legal_scouts()), scout_and_show_available=scout_and_show,
            request_id=request_id, deadline_ms=deadline_ms, time_bank_ms=time_bank_ms)

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
        card = self.active_set[0 if scout.end == End.LEFT else -1]
        return card.flipped() if scout.flip else card

    def hand_after(self, scout: Scout) -> tuple[Card, ...]:
        """The hand after a Scout, which is what the Show part of a Scout & Show indexes."""
        hand = list(self.hand)
        hand.insert(scout.insert_at, self.scouted_card(scout))
        return tuple(hand)

    def active_after(self, scout: Scout) -> tuple[Card, ...]:
        """What remains of the active set after a Scout (what a Scout & Show must beat)."""
        return self.active_set[1:] if scout.end == End.LEFT else self.active_set[:-1]

    def scout_and_shows(self) -> list[ScoutAndShow]:
        """Every Scout & Show this seat may play now (empty when none is available), found by
        trying each legal Scout against the hand it would leave: in the order of the legal
        Scouts, then by start and length."""
        if not self.scout_and_show_available:
            return []
        options: list[ScoutAndShow] = []
        for scout in self.legal_scouts:
            faces = [card.face for card in self.hand_after(scout)]
            remaining = [card.face for card in self.active_after(scout)]
            options.extend(ScoutAndShow(scout, show) for show in groups_in(faces, remaining))
        return options

    def is_legal(self, action: Action) -> bool:
        """Whether the referee will accept `action`: Shows and Scouts are checked against the
        request's lists; a Scout & Show needs the token, a legal Scout, and a Show that is a
        group of the resulting hand beating what remains of the active set."""
        if isinstance(action, Show):
            return action in self.legal_shows
        if isinstance(action, Scout):
            return action in self.legal_scouts
        if not self.scout_and_show_available or action.scout not in self.legal_scouts:
            return False
        hand = self.hand_after(action.scout)
        show = action.show
        if show.start < 0 or show.length < 1 or show.stop > len(hand):
            return False
        shown = [card.face for card in hand[show.start : show.stop]]
        remaining = [card.face for card in self.active_after(action.scout)]
        return beats(shown, remaining)

    def information_set(self, excluded: Iterable[tuple[int, int]] = ()) -> InformationSet:
        """This seat's knowledge of the round as the rules package's `InformationSet`: its
        `determinize(rng)` is an engine `State` of this very moment, the unseen cards filled
        consistently with the history, which a search can play forward (`legal_actions`,
        `apply`, `clone`). ``excluded``: cards known to be out of this round (with two
        players, round 1's once round 2 is played). Raises `scout_rules.InvalidPosition` if
        the observation does not add up (no referee sends such)."""
        return InformationSet(
            seat=self.seat, num_players=self.num_players, round_index=self.round_index,
            hand=self.hand, hand_sizes=self.hand_sizes, captured_counts=self.captured_counts,
            scout_chips=self.scout_chips, scout_show_tokens=self.scout_show_tokens,
            scores=self.scores, current_seat=self.current_seat, history=self.history,
            excluded=frozenset(excluded))

    def fallback(self) -> Action:
        """The always-legal answer the SDK sends when the bot cannot: the first legal Show
        (lowest start, then shortest, like the referee's own fallback), else the first legal
        Scout."""
        if self.legal_shows:
            return min(self.legal_shows, key=lambda show: (show.start, show.length))
        if self.legal_scouts:
            return self.legal_scouts[0]
        return Scout(End.LEFT, flip=False, insert_at=0)
