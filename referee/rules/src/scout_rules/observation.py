"""What one seat may know of a match, with the legal moves it has from there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from ._native import SPEEDUPS
from .actions import Action, PublicAction, Scout, ScoutAndShow, Show
from .cards import Card, Hand, faces_of
from .moves import (
    NO_ACTIVE_SET,
    group_key,
    has_scout_and_show,
    legal_scout_and_shows,
    legal_scouts,
    legal_shows,
)
from .rounds import Phase


@dataclass(frozen=True, slots=True)
class Observation:
    """What one seat may know: its own hand and the public state, nothing of another hand."""

    seat: int
    num_players: int
    num_rounds: int
    round_index: int
    starting_seat: int
    phase: Phase
    hand: Hand
    rotation_chosen: bool
    hand_sizes: tuple[int, ...]
    active_set: tuple[Card, ...]
    active_owner: int | None
    captured_counts: tuple[int, ...]
    scout_chips: tuple[int, ...]
    scout_show_tokens: tuple[bool, ...]
    scores: tuple[int, ...]
    current_seat: int | None
    history: tuple[PublicAction, ...]

    @property
    def is_my_turn(self) -> bool:
        return self.phase is Phase.PLAY and self.current_seat == self.seat

    def legal_shows(self) -> list[Show]:
        return self._legal_shows(self.hand.faces)

    def _legal_shows(self, faces: tuple[int, ...]) -> list[Show]:
        active = self.active_set
        return legal_shows(faces, group_key(faces_of(active))
                           if active else NO_ACTIVE_SET)

    def can_scout(self) -> bool:
        """Whether the seat may Scout at all: there is an active set, and in 2-player matches
        the seat has a Scout chip left. The legal Scouts then depend only on the sizes."""
        return bool(self.active_set) and not (
            self.num_players == 2 and self.scout_chips[self.seat] == 0)

    def legal_scouts(self) -> list[Scout]:
        if not self.can_scout():
            return []
        return legal_scouts(len(self.hand), len(self.active_set))

    def can_scout_and_show(self) -> bool:
        return self._can_scout_and_show(self.hand.faces)

    def _can_scout_and_show(self, faces: tuple[int, ...]) -> bool:
        return (
            self.num_players > 2
            and self.scout_show_tokens[self.seat]
            and has_scout_and_show(faces, self.active_set)
        )

    def shows_and_scout_and_show(self) -> tuple[list[Show], bool]:
        """`legal_shows` and `can_scout_and_show` together, the hand's faces read once: what
        every decision request lists."""
        faces = self.hand.faces
        return self._legal_shows(faces), self._can_scout_and_show(faces)

    def legal_scout_and_shows(self) -> list[ScoutAndShow]:
        if self.num_players == 2 or not self.scout_show_tokens[self.seat] or not self.active_set:
            return []
        return legal_scout_and_shows(self.hand.faces, self.active_set)

    def legal_actions(self) -> list[Action]:
        if not self.is_my_turn:
            return []
        return [*self.legal_shows(), *self.legal_scouts(), *self.legal_scout_and_shows()]


new_observation: Callable[..., Observation] = (
    Observation if SPEEDUPS is None
    else SPEEDUPS.maker(Observation, tuple(f.name for f in fields(Observation))))
"""`Observation` from its fields' values in order, for the engine's own, checked values: the
C extension sets the slots without the frozen dataclass's ``__init__`` (most of its cost)."""
