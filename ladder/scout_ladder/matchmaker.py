"""Forming tables among connected, idle bots, after Halite's matchmaker.

A *seed* bot is drawn favouring bots with few games, high uncertainty and a long wait; its
opponents are the idle bots closest to it in mu, each distance blurred by a random spread so
that neighbours in the standings do not meet only each other. Two bots of one owner never share
a table unless configured. Tables are only ever of an allowed size (``table_sizes``): a size
is drawn among those the idle bots can fill, and none is formed when none can. Pure and
synchronous: the service gives it candidates and asks for one table at a time, so it can be
benchmarked with thousands of bots.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
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


def seats_fillable(owners: Sequence[str], config: MatchmakerConfig) -> int:
    """How many seats of one table bots of these owners can fill: one per owner, unless the
    configuration allows two bots of one owner at a table."""
    return len(owners) if config.allow_same_owner else len(set(owners))


def allowed_sizes(config: MatchmakerConfig) -> list[int]:
    return sorted({s for s in config.table_sizes if s >= config.min_table})


def choose_table(candidates: Sequence[Candidate], config: MatchmakerConfig,
                 rng: random.Random) -> list[Candidate] | None:
    """One table (seed bot first) of an allowed size, or None when no allowed size can be
    seated from the candidates (too few of them, or of too few owners)."""
    reach = seats_fillable([c.owner for c in candidates], config)
    sizes = [s for s in allowed_sizes(config) if s <= reach]
    if not sizes:
        return None
    size = rng.choice(sizes)
    weights = [seed_weight(c) for c in candidates]
    seed = rng.choices(candidates, weights=weights, k=1)[0]
    owners = {seed.owner}
    ranked = sorted((abs(c.mu - seed.mu) + abs(rng.gauss(0.0, config.spread)), i)
                    for i, c in enumerate(candidates) if c is not seed)
    table = [seed]
    for _, i in ranked:
        if len(table) == size:
            break
        c = candidates[i]
        if not config.allow_same_owner and c.owner in owners:
            continue
        table.append(c)
        owners.add(c.owner)
    # Every owner but the seed's has a bot among the others, so the table is always full.
    return table if len(table) == size else None


def why_no_table(bots: Mapping[str, str], config: MatchmakerConfig) -> str | None:
    """None when some allowed table size can be seated from ``bots`` (name -> owner);
    otherwise why not, in words an operator can act on."""
    sizes = allowed_sizes(config)
    if not sizes:
        return "no table size is allowed"
    smallest = min(sizes)
    shown = ",".join(map(str, sizes))
    if seats_fillable(list(bots.values()), config) >= smallest:
        return None
    if config.allow_same_owner or len(bots) < smallest:
        return (f"{len(bots)} bot{'' if len(bots) == 1 else 's'}, and the smallest allowed "
                f"table (--table-sizes {shown}) seats {smallest}")
    counts = Counter(bots.values())
    owners = ", ".join(f"{owner} {n}" for owner, n in sorted(counts.items()))
    return (f"{len(bots)} bots but of only {len(counts)} owners ({owners}), and a table seats "
            f"one bot per owner: the smallest allowed table (--table-sizes {shown}) needs "
            f"{smallest} owners (allow smaller tables, or two bots of one owner at a table "
            "with --allow-same-owner)")


def unfillable_sizes(bots: Mapping[str, str], config: MatchmakerConfig) -> list[int]:
    """The allowed table sizes that ``bots`` (name -> owner) can never seat."""
    reach = seats_fillable(list(bots.values()), config)
    return [s for s in allowed_sizes(config) if s > reach]
