"""Forming tables among connected, idle bots, after Halite's matchmaker.

A *seed* bot is drawn favouring bots with few games, high uncertainty and a long wait; its
opponents are the idle bots closest to it in mu, each distance blurred by a random spread so
that neighbours in the standings do not meet only each other. Two bots of one owner never share
a table unless configured. Pure and synchronous: the service gives it candidates and asks for
one table at a time, so it can be benchmarked with thousands of bots.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """An idle bot as the matchmaker sees it."""

    name: str
    owner: str
    mu: float
    sigma: float
    games: int
    waiting_s: float


@dataclass(frozen=True)
class MatchmakerConfig:
    table_sizes: tuple[int, ...] = (4,)
    spread: float = 2.0
    allow_same_owner: bool = False
    min_table: int = 2


def seed_weight(c: Candidate) -> float:
    """Few games, high sigma and a long wait all raise the chance to be picked first."""
    return (c.sigma / 8.333) + 3.0 / math.sqrt(1 + c.games) + min(c.waiting_s, 600.0) / 30.0


def choose_table(candidates: Sequence[Candidate], config: MatchmakerConfig,
                 rng: random.Random) -> list[Candidate] | None:
    """One table (seed bot first), or None when no legal table can be formed."""
    if len(candidates) < config.min_table:
        return None
    size = rng.choice(config.table_sizes)
    size = min(size, len(candidates))
    weights = [seed_weight(c) for c in candidates]
    seed = rng.choices(candidates, weights=weights, k=1)[0]
    owners = {seed.owner}
    ranked = sorted((abs(c.mu - seed.mu) + abs(rng.gauss(0.0, config.spread)), i)
                    for i, c in enumerate(candidates) if c is not seed)
    table = [seed]
    for _, i in ranked:
        c = candidates[i]
        if not config.allow_same_owner and c.owner in owners:
            continue
        table.append(c)
        owners.add(c.owner)
        if len(table) == size:
            break
    return table if len(table) >= config.min_table else None
