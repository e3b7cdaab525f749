"""GreedyBot against RandomBot over a few hundred seeded matches, seats rotated.

Run as ``.venv/bin/python bench/bots.py [--matches N] [--json PATH]``.

Design. Every seed is played twice with the same deal and the bots' seats swapped, so each bot
kind holds every seat equally often and the deal's luck cancels within a seed:

* 2 players: greedy-random and random-greedy.
* 4 players: greedy-random-greedy-random and random-greedy-random-greedy (two of each kind).

``--matches N`` is the number of matches per player count, rounded up to an even number
(N/2 seeds). Bot seeds are ``seed * 8 + seat``, so a run is exactly reproducible.

Figures, per player count and bot kind:

* win share: for each match, the kind's share of the seats ranked first (a kind that holds every
  first place gets 1; a first place shared by one greedy and one random seat gives each kind 0.5).
  With 2 players this is "greedy wins = 1, shared first = 0.5, loss = 0".
* mean match score and mean rank of the kind's seats (ranks are competition ranks, 1 best).
* greedy minus random: the difference of the kinds' mean match scores within each match.

Confidence intervals (95%) treat the seed as the unit: each figure is first averaged over the
seed's two matches (which share the deal and are therefore not independent), then the mean over
seeds gets a Student-t interval, mean +/- t(0.975, k-1) * sd / sqrt(k) for k seeds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from common import write_json
from rich.console import Console
from rich.table import Table
from scout_arena.local import make_bot, play_match
from scout_client import Bot

JSON = dict[str, Any]
KINDS = ("greedy", "random")
ARRANGEMENTS: dict[int, tuple[tuple[str, ...], ...]] = {
    2: (("greedy", "random"), ("random", "greedy")),
    4: (("greedy", "random", "greedy", "random"), ("random", "greedy", "random", "greedy")),
}
METRICS = ("win_share", "mean_score", "mean_rank")


def t_quantile_975(df: int) -> float:
    """Student t 0.975 quantile (Cornish-Fisher expansion; within 1e-4 for df >= 5)."""
    z = statistics.NormalDist().inv_cdf(0.975)
    if df <= 0:
        return math.inf
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return float(z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4)


def mean_ci(values: Sequence[float]) -> JSON:
    """Mean with a 95% Student-t confidence interval."""
    k = len(values)
    mean = statistics.fmean(values)
    half = t_quantile_975(k - 1) * statistics.stdev(values) / math.sqrt(k) if k > 1 else math.inf
    return {"mean": mean, "ci95_low": mean - half, "ci95_high": mean + half,
            "ci95_half_width": half, "n": k}


def make(kind: str, seed: int) -> Bot:
    return make_bot(kind, seed)


def play_one(seats: Sequence[str], seed: int) -> JSON:
    """One match; per-kind figures of the seats each kind holds."""
    state = play_match([make(kind, seed * 8 + s) for s, kind in enumerate(seats)], seed)
    scores = list(state.scores)
    ranks = list(state.ranks())
    firsts = [s for s, r in enumerate(ranks) if r == 1]
    per_kind: JSON = {}
    for kind in KINDS:
        mine = [s for s, k in enumerate(seats) if k == kind]
        per_kind[kind] = {
            "win_share": sum(1 for s in firsts if seats[s] == kind) / len(firsts),
            "mean_score": statistics.fmean(scores[s] for s in mine),
            "mean_rank": statistics.fmean(ranks[s] for s in mine),
        }
    return {"seed": seed, "seats": list(seats), "scores": scores, "ranks": ranks,
            "per_kind": per_kind}


def run_count(num_players: int, matches: int, first_seed: int) -> JSON:
    seeds = range(first_seed, first_seed + (matches + 1) // 2)
    played: list[JSON] = []
    by_seed: dict[str, list[float]] = {f"{kind}.{m}": [] for kind in KINDS for m in METRICS}
    by_seed["score_diff"] = []
    t0 = time.perf_counter()
    for seed in seeds:
        pair = [play_one(seats, seed) for seats in ARRANGEMENTS[num_players]]
        played.extend(pair)
        for kind in KINDS:
            for m in METRICS:
                by_seed[f"{kind}.{m}"].append(
                    statistics.fmean(p["per_kind"][kind][m] for p in pair))
        by_seed["score_diff"].append(statistics.fmean(
            p["per_kind"]["greedy"]["mean_score"] - p["per_kind"]["random"]["mean_score"]
            for p in pair))
    elapsed = time.perf_counter() - t0
    outright = {kind: sum(1 for p in played if p["per_kind"][kind]["win_share"] == 1.0)
                for kind in KINDS}
    ties_first = sum(1 for p in played if p["ranks"].count(1) > 1)
    return {
        "players": num_players,
        "matches": len(played),
        "seeds": [seeds.start, seeds.stop - 1],
        "seconds": elapsed,
        "arrangements": [list(a) for a in ARRANGEMENTS[num_players]],
        "greedy": {m: mean_ci(by_seed[f"greedy.{m}"]) for m in METRICS},
        "random": {m: mean_ci(by_seed[f"random.{m}"]) for m in METRICS},
        "score_diff_greedy_minus_random": mean_ci(by_seed["score_diff"]),
        "matches_won_outright": outright,
        "matches_with_shared_first": ties_first,
        "match_results": [{k: p[k] for k in ("seed", "seats", "scores", "ranks")}
                          for p in played],
    }


def cell(stat: JSON, pct: bool = False) -> str:
    if pct:
        return f"{100 * stat['mean']:.1f}% ± {100 * stat['ci95_half_width']:.1f}"
    return f"{stat['mean']:+.2f} ± {stat['ci95_half_width']:.2f}"


def report(console: Console, result: JSON) -> None:
    n = result["players"]
    kinds = " vs ".join("".join(k[0].upper() for k in a) for a in result["arrangements"])
    table = Table(title=f"{n} players: {result['matches']} matches "
                        f"(seeds {result['seeds'][0]}-{result['seeds'][1]}, seatings {kinds})")
    table.add_column("figure (mean ± 95% CI half-width)")
    table.add_column("greedy", justify="right")
    table.add_column("random", justify="right")
    table.add_column("greedy - random", justify="right")
    g, r = result["greedy"], result["random"]
    diff = result["score_diff_greedy_minus_random"]
    table.add_row("win share (shared first split)", cell(g["win_share"], True),
                  cell(r["win_share"], True), "")
    table.add_row("mean match score", cell(g["mean_score"]), cell(r["mean_score"]), cell(diff))
    table.add_row("mean rank", f"{g['mean_rank']['mean']:.2f} ± "
                  f"{g['mean_rank']['ci95_half_width']:.2f}",
                  f"{r['mean_rank']['mean']:.2f} ± {r['mean_rank']['ci95_half_width']:.2f}", "")
    console.print(table)
    won = result["matches_won_outright"]
    console.print(f"[dim]matches where one kind holds every first place: greedy {won['greedy']}, "
                  f"random {won['random']}; {result['matches_with_shared_first']} with a shared "
                  f"first place; {result['seconds']:.1f} s[/]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=300,
                        help="matches per player count (rounded up to even; default 300)")
    parser.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    args = parser.parse_args(argv)
    if args.matches < 2:
        parser.error("--matches must be at least 2")
    console = Console()
    results = [run_count(n, args.matches, args.seed) for n in sorted(ARRANGEMENTS)]
    for result in results:
        report(console, result)
    if args.json:
        data = {
            "benchmark": "GreedyBot vs RandomBot",
            "win_share_rule": "per match, a kind's share of the seats ranked 1 "
                              "(shared first place split evenly between the seats sharing it)",
            "ci_method": "seed is the unit (mean of its two seatings); Student-t 95% interval",
            "results": results,
        }
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
