from collections.abc import Sequence

from .actions import Action, End, Scout, ScoutAndShow, Show
from .cards import Card

def round_scores(n: int, hands: list[list[Card]], active: Sequence[Card], captured: list[int],
                 chips: list[int], tokens: list[bool], last_shower: int,
                 scouts_since_show: int, current_seat: int, round_actions: int,
                 max_actions: int, /) -> tuple[int, ...] | None: ...
def candidates(faces: Sequence[int], active: Sequence[Card], players: int, token: bool,
               chips: int, scouts_per_way: int, max_combos: int, /) -> list[Action] | None: ...
def setup(show: type[Show], scout: type[Scout], scout_and_show: type[ScoutAndShow],
          left: End, right: End, /) -> None: ...
