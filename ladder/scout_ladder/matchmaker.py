"""Forming tables among connected, idle bots, after Halite's matchmaker.

A *seed* bot is drawn favouring bots with few games, high uncertainty and a long wait; its
opponents are the idle bots closest to it in mu, each distance blurred by a random spread so
that neighbours in the standings do not meet only each other. A pass forms all its tables at
once (`choose_tables`), in O(n log n) for n idle bots. Two bots of one owner never share
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


NEIGHBOURS = 32
"""How many untaken bots nearest in mu, on each side of a seed, are ranked for its table: the
blur (``spread``) rarely lets a farther one win, and the bound keeps a pass over n bots at
O(n log n) instead of a full sort per table (10,000 idle bots: 2,500 tables)."""


def choose_tables(candidates: Sequence[Candidate], config: MatchmakerConfig,
                  rng: random.Random, limit: int | None = None) -> list[list[Candidate]]:
    """Tables (seed bot first) for one scheduling pass, at most ``limit``, each of an allowed
    size, no bot in two. Seeds come in weighted random order (`seed_weight`: the order of
    drawing one weighted seed after another, without replacement); each table is the seed and
    the bots closest to it in mu, each distance blurred by ``spread``, among its `NEIGHBOURS`
    untaken neighbours in mu order on each side (all untaken bots when owners leave too few
    there). Bots of equal mu are in random order, so ties do not always meet the same way."""
    n = len(candidates)
    if n == 0 or limit == 0:
        return []
    order = list(range(n))
    rng.shuffle(order)
    order.sort(key=lambda i: candidates[i].mu)
    position = [0] * n
    for p, i in enumerate(order):
        position[i] = p
    # A doubly linked list over the mu order, of the bots not yet seated.
    before = list(range(-1, n - 1))
    after = list(range(1, n + 1))
    taken = [False] * n
    owners_left = Counter(c.owner for c in candidates)
    left = n
    # Efraimidis-Spirakis: sorting by u^(1/w) is drawing by weight without replacement.
    keys = [rng.random() ** (1.0 / max(seed_weight(c), 1e-9)) for c in candidates]
    seeds = sorted(range(n), key=keys.__getitem__, reverse=True)
    sizes_allowed = allowed_sizes(config)
    tables: list[list[Candidate]] = []

    def take(i: int) -> None:
        nonlocal left
        taken[i] = True
        left -= 1
        owners_left[candidates[i].owner] -= 1
        p = position[i]
        if before[p] >= 0:
            after[before[p]] = after[p]
        if after[p] < n:
            before[after[p]] = before[p]

    def near(i: int) -> list[int]:
        found = []
        lo, hi = before[position[i]], after[position[i]]
        for _ in range(NEIGHBOURS):
            if lo >= 0:
                found.append(order[lo])
                lo = before[lo]
            if hi < n:
                found.append(order[hi])
                hi = after[hi]
        return found

    def fill(seed: int, pool: list[int], size: int) -> list[int]:
        ranked = sorted((abs(candidates[i].mu - candidates[seed].mu)
                         + abs(rng.gauss(0.0, config.spread)), i) for i in pool)
        table, owners = [seed], {candidates[seed].owner}
        for _, i in ranked:
            if len(table) == size:
                break
            if not config.allow_same_owner and candidates[i].owner in owners:
                continue
            table.append(i)
            owners.add(candidates[i].owner)
        return table

    for seed in seeds:
        if taken[seed]:
            continue
        if limit is not None and len(tables) >= limit:
            break
        reach = left if config.allow_same_owner else sum(1 for k in owners_left.values() if k)
        sizes = [z for z in sizes_allowed if z <= reach]
        if not sizes:
            break
        size = rng.choice(sizes)
        table = fill(seed, near(seed), size)
        if len(table) < size:  # owners repeat nearby: rank every untaken bot
            table = fill(seed, [i for i in range(n) if not taken[i] and i != seed], size)
        # Every owner but the seed's has a bot among the others, so the table is full.
        if len(table) < size:
            continue
        for i in table:
            take(i)
        tables.append([candidates[i] for i in table])
    return tables


def choose_table(candidates: Sequence[Candidate], config: MatchmakerConfig,
                 rng: random.Random) -> list[Candidate] | None:
    """One table (seed bot first) of an allowed size, or None when no allowed size can be
    seated from the candidates (too few of them, or of too few owners): `choose_tables`
    with a limit of one."""
    tables = choose_tables(candidates, config, rng, limit=1)
    return tables[0] if tables else None


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
