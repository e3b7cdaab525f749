"""The SCOUT rules engine: pure, deterministic from a seed, no I/O, no clock."""

from .actions import Action, End, Scout, ScoutAndShow, Show
from .cards import Card, Hand, SplitMix64, deal_match, deck_for, player_count_rules
from .errors import IllegalAction, MalformedAction, OutOfTurn, ScoutError
from .moves import describe_faces, group_key
from .spectator import FinishedRound, SpectatorView, spectator_view
from .state import (
    Observation,
    Phase,
    PublicAction,
    RoundEnd,
    RoundLog,
    RoundResult,
    State,
    rank_scores,
)

__all__ = [
    "Action", "Card", "End", "FinishedRound", "Hand", "IllegalAction", "MalformedAction",
    "Observation",
    "OutOfTurn", "Phase", "PublicAction", "RoundEnd", "RoundLog", "RoundResult", "Scout",
    "ScoutAndShow", "ScoutError", "Show", "SpectatorView", "SplitMix64", "State", "deal_match",
    "deck_for", "describe_faces", "group_key", "player_count_rules", "rank_scores",
    "spectator_view",
]
