"""The search bot: information-set MCTS over the engine, as an SDK `Bot` (see README.md)."""

from .bot import DEFAULT_THINK_MS, SAFETY_MARGIN_MS, SearchBot, SearchStats, time_budget_ms
from .knowledge import Reads
from .mcts import SearchResult, search

__all__ = [
    "DEFAULT_THINK_MS", "SAFETY_MARGIN_MS", "Reads", "SearchBot", "SearchResult",
    "SearchStats", "search", "time_budget_ms",
]
