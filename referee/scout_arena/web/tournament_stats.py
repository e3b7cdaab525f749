"""A tournament's numbers as its terminal shows them (win share, mean score with its 95%
interval, mean rank, head-to-head shares), for a tournament still running: once it ends, the
pages show summary.json's own numbers, which these equal (tests/test_web.py checks it).

The tallies are `record.tally`'s, as the tournament's standings are; the web pages do not
import the tournament runner (the layers contract in pyproject.toml).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..record import JSON, MatchOutcome
from ..record.tally import SeatTally, head_to_head

__all__ = ["bot_stats", "head_to_head"]


def _to_json(tally: SeatTally) -> JSON:
    n = len(tally.scores)
    mean, half = tally.mean_score_ci()
    return {
        "win_rate": round(tally.wins / n, 4) if n else None,
        "mean_score": round(mean, 3) if n else None,
        "mean_score_ci95": round(half, 3) if n >= 2 else None,
        "mean_rank": round(statistics.fmean(tally.ranks), 3) if n else None,
        "timeouts": tally.timeouts,
        "illegal_actions": tally.illegal_actions,
        "forfeits": tally.forfeits,
    }


def bot_stats(outcomes: Sequence[MatchOutcome]) -> dict[str, JSON]:
    """Each bot's line of the terminal's standings, beyond its rating."""
    tallies: dict[str, SeatTally] = {}
    for outcome in outcomes:
        for seat, name in enumerate(outcome.players):
            tallies.setdefault(name, SeatTally()).add(outcome, seat)
    return {name: _to_json(t) for name, t in tallies.items()}
