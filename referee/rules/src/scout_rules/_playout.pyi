from collections.abc import Sequence

from .cards import Card

def round_scores(n: int, hands: list[list[Card]], active: Sequence[Card], captured: list[int],
                 chips: list[int], tokens: list[bool], last_shower: int,
                 scouts_since_show: int, current_seat: int, round_actions: int,
                 max_actions: int, /) -> tuple[int, ...] | None: ...
