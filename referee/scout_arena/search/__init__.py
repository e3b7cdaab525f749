"""The search bot: information-set MCTS over the engine, as an SDK `Bot` (see README.md)."""

from .bot import DEFAULT_THINK_MS, SAFETY_MARGIN_MS, SearchBot, SearchStats, time_budget_ms
from .knowledge import ScoutReads, sample
from .mcts import SearchResult, search

__all__ = [
    "DEFAULT_THINK_MS", "SAFETY_MARGIN_MS", "ScoutReads", "SearchBot", "SearchResult",
    "SearchStats", "sample", "search", "time_budget_ms",
]
