"""SCOUT for reinforcement learning: a PettingZoo AEC environment (`scout_arena.env.aec`) and an
OpenSpiel game (`scout_arena.env.spiel`, registered as ``python_scout`` on import), both on the
rules engine, sharing one action encoding (`ActionCodec`) and one observation layout
(`ObservationLayout`); docs/env.md documents both.

This package imports numpy; PettingZoo and OpenSpiel are imported only by their own modules
(extras ``rl`` and ``openspiel``), so either can be used without the other.
"""

from .actions import KEEP, MAX_GROUP, ROTATE, ActionCodec, Decision, Rotation, max_hand
from .known import KnownCards
from .masks import apply_decision, legal_ids, legal_mask, seat_to_decide
from .observation import CARD_ROW, ObservationLayout

__all__ = [
    "CARD_ROW", "KEEP", "MAX_GROUP", "ROTATE", "ActionCodec", "Decision", "KnownCards",
    "ObservationLayout", "Rotation", "apply_decision", "legal_ids", "legal_mask", "max_hand",
    "seat_to_decide",
]
