"""The SCOUT rules engine: pure, deterministic from a seed, no I/O, no clock, the standard
library only. The referee, the SDK and any Python bot share its card and action types."""

from .actions import Action, ActionKind, End, PublicAction, Scout, ScoutAndShow, Show
from .cards import Card, Hand, SplitMix64, deal_match, deck_for, player_count_rules
from .errors import (
    BadShape,
    CardsDontAddUp,
    IllegalAction,
    InconsistentTable,
    InvalidPosition,
    MalformedAction,
    OutOfTurn,
    ScoutError,
)
from .groups import (
    Strength,
    beats,
    group_strength,
    groups_in,
    hand_potential,
    more_playable_rotated,
)
from .information import InformationSet
from .moves import describe_faces, group_key
from .observation import Observation
from .position import Position
from .rounds import Phase, RoundEnd, RoundLog, RoundResult, rank_scores
from .spectator import FinishedRound, SpectatorView, spectator_view
from .state import State

__all__ = [
    "Action", "ActionKind", "BadShape", "Card", "CardsDontAddUp", "End", "FinishedRound",
    "Hand", "IllegalAction", "InconsistentTable", "InformationSet", "InvalidPosition",
    "MalformedAction", "Observation", "OutOfTurn", "Phase", "Position", "PublicAction",
    "RoundEnd", "RoundLog", "RoundResult", "Scout", "ScoutAndShow", "ScoutError", "Show",
    "SpectatorView", "SplitMix64", "State", "Strength", "beats", "deal_match", "deck_for",
    "describe_faces", "group_key", "group_strength", "groups_in", "hand_potential",
    "more_playable_rotated", "player_count_rules", "rank_scores", "spectator_view",
]
