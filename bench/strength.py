"""Strength benchmark: one bot against a field of another on duplicate deals, 2 to 5 players.

Run as ``.venv/bin/python bench/strength.py --json bench/results/strength.json``. Each deal (a
match seed) is played once for every seat position of the candidate bot, the opponent bot in
every other seat, in process (`scout_arena.local.play_match`), so every seat's cards are held
by the candidate once and the luck of the deal mostly cancels. ``--matches M`` (default 1000)
is the number of matches per player count, rounded up to whole deals.

A bot is named as ``NAME[:KEY=VALUE,...]``: ``greedy``, ``random``, ``search`` (the default
bundled bot, 200 ms a decision), ``search:iterations=200``, ``search:think_ms=400``; the keys are
`SearchBot`'s keyword arguments, each read as the type it declares (``true``/``false`` in
any case, numbers that must parse). ``--bot`` defaults to ``search:iterations=100`` and
``--opponent`` to ``greedy``. The targets are the issues': against greedy 65 / 65 / 60 / 50 %
at 2 / 3 / 4 / 5 players (and 80 % at 4 for a default-strength bot), against
``search:iterations=200,scouts=2,sample_tries=1,observe=false`` (issue 31's baseline, the
search bot as it was when the issue was filed) 65 / 50 / 45 / 35 %.

Per player count: the win rate (the candidate ranks first; a first place shared by k seats
counts 1/k, as the tournament standings split shared firsts; the strict and shared-included
rates are in the JSON too), the mean rank (1 = best, competition ranks: equal scores share a
rank) and the mean score difference (the candidate's match score minus the mean of the other
seats' in the same match). The 95 % intervals are normal intervals over the per-deal means, the
matches of one deal being correlated: mean +- 1.96 sd / sqrt(deals). ``--workers W`` plays the
deals in W processes (default 1); in time mode a busy machine gives a bot fewer iterations.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from common import write_json
from rich.console import Console
from rich.table import Table
from scout_arena.local import bot_from_spec, play_match
from scout_arena.search import SearchBot
from scout_client import Action, Bot, Observation, RotationRequest
from scout_rules.protocol import DEFAULT_DECISION_MS

PLAYER_COUNTS = (2, 3, 4, 5)
#: Win-rate targets by opponent (the issues' figures).
# Issue 31's baseline is the search bot as it was then: 200 iterations, two Scouts per end and
# way up below the root at every table size (`scouts=2`; the default is 1 at 2-3 players since),
# uniform fills of the hidden hands (`sample_tries=1`) and a tree keyed by hand positions alone.
BASELINE_SEARCH = "search:iterations=200,scouts=2,sample_tries=1,observe=false"
TARGETS = {"greedy": {2: 0.65, 3: 0.65, 4: 0.60, 5: 0.50},
           BASELINE_SEARCH: {2: 0.65, 3: 0.50, 4: 0.45, 5: 0.35}}
SEED_BASE = 0x5EA2C4_0000

JSON = dict[str, Any]


Match = tuple[float, float, float, float, float, float, float, float]


def make(spec: str, seed: int) -> Bot:
    """The bot a spec names (``NAME[:KEY=VALUE,...]``), seeded with ``seed``."""
    try:
        return bot_from_spec(spec, seed)
    except ValueError as error:
        print(f"strength.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _watch(bot: Bot) -> tuple[list[int], list[float]]:
    """The search iterations of each decision ``bot`` makes from now on (none for a bot that
    does not search), and the wall milliseconds of each of its answers, rotations included."""
    counts: list[int] = []
    millis: list[float] = []
    act, rotate = bot.act, bot.choose_rotation

    def timed_act(observation: Observation) -> Action | Awaitable[Action]:
        started = time.perf_counter()
        action = act(observation)
        millis.append((time.perf_counter() - started) * 1000)
        if isinstance(bot, SearchBot):
            counts.append(bot.last_stats.iterations)
        return action

    def timed_rotation(request: RotationRequest) -> bool | Awaitable[bool]:
        started = time.perf_counter()
        choice = rotate(request)
        millis.append((time.perf_counter() - started) * 1000)
        return choice

    bot.act = timed_act  # type: ignore[method-assign]
    bot.choose_rotation = timed_rotation  # type: ignore[method-assign]
    return counts, millis


def play_deal(num_players: int, deal: int, bot: str, opponent: str) -> list[Match]:
    """One deal at every seat position: per match (win share, strict win, shared-or-strict win,
    rank, score difference, seconds, the candidate's mean search iterations a decision and its
    slowest answer in ms)."""
    seed = SEED_BASE + num_players * 1_000_003 + deal
    out: list[Match] = []
    for position in range(num_players):
        bots = [make(bot if s == position else opponent, deal * 10 + s)
                for s in range(num_players)]
        searched, millis = _watch(bots[position])
        started = time.perf_counter()
        state = play_match(bots, seed, match_id=f"strength-{num_players}-{deal}-{position}")
        seconds = time.perf_counter() - started
        ranks = state.ranks()
        firsts = sum(1 for r in ranks if r == 1)
        mine = ranks[position]
        share = 1.0 / firsts if mine == 1 else 0.0
        others = [state.scores[s] for s in range(num_players) if s != position]
        diff = state.scores[position] - sum(others) / len(others)
        out.append((share, float(mine == 1 and firsts == 1), float(mine == 1), float(mine),
                    diff, seconds, statistics.fmean(searched) if searched else 0.0,
                    max(millis, default=0.0)))
    return out


def interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95 % interval."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.inf
    return mean, 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def measure(num_players: int, matches: int, bot: str, opponent: str, workers: int,
            console: Console, first_deal: int = 0) -> JSON:
    deals = max(2, math.ceil(matches / num_players))
    started = time.perf_counter()
    rows: list[list[Match]] = []

    def add(row: Iterable[Match]) -> None:
        rows.append(list(row))
        if len(rows) % max(1, deals // 10) == 0:
            console.print(f"[dim]{num_players} players: {len(rows)}/{deals} deals, "
                          f"{time.perf_counter() - started:.0f} s[/]")

    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            futures = [pool.submit(play_deal, num_players, d, bot, opponent)
                       for d in range(first_deal, first_deal + deals)]
            for future in futures:  # in deal order, so win_share_per_deal stays aligned
                add(future.result())
    else:
        for d in range(first_deal, first_deal + deals):
            add(play_deal(num_players, d, bot, opponent))
    wall = time.perf_counter() - started

    def per_deal(column: int) -> list[float]:
        return [statistics.fmean(m[column] for m in deal) for deal in rows]

    win, win_ci = interval(per_deal(0))
    strict, _ = interval(per_deal(1))
    shared, _ = interval(per_deal(2))
    rank, rank_ci = interval(per_deal(3))
    diff, diff_ci = interval(per_deal(4))
    seconds = [m[5] for deal in rows for m in deal]
    iterations = [m[6] for deal in rows for m in deal]
    slowest = max(m[7] for deal in rows for m in deal)
    target = TARGETS.get(opponent, {}).get(num_players)
    return {
        "players": num_players, "deals": deals, "matches": deals * num_players,
        "first_deal": first_deal, "win_share_per_deal": per_deal(0),
        "win_rate": round(win, 4), "win_rate_ci95": round(win_ci, 4),
        "win_rate_strict": round(strict, 4), "win_rate_ties_as_wins": round(shared, 4),
        "target": target, "meets_target": None if target is None else win >= target,
        "mean_rank": round(rank, 3), "mean_rank_ci95": round(rank_ci, 3),
        "score_diff": round(diff, 2), "score_diff_ci95": round(diff_ci, 2),
        "seconds_per_match": round(statistics.fmean(seconds), 3), "wall_s": round(wall, 1),
        "iterations_per_decision": round(statistics.fmean(iterations), 1),
        "slowest_answer_ms": round(slowest, 1),
        "matches_with_an_answer_over_decision_ms": sum(
            m[7] > DEFAULT_DECISION_MS for deal in rows for m in deal),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=Path("bench/results/strength.json"))
    parser.add_argument("--matches", type=int, default=1000, help="matches per player count")
    parser.add_argument("--players", type=int, action="append", choices=PLAYER_COUNTS,
                        help="player counts to measure (repeatable; default: 2 3 4 5)")
    parser.add_argument("--bot", default="search:iterations=100",
                        help="the candidate (default search:iterations=100)")
    parser.add_argument("--opponent", default="greedy", help="every other seat (default greedy)")
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--first-deal", type=int, default=0,
                        help="start at this deal (to add matches to an earlier run's sample; "
                        "the JSON's win_share_per_deal pools)")
    args = parser.parse_args()
    make(args.bot, 0), make(args.opponent, 0)  # a bad spec fails before any match
    console = Console(width=140)
    rows = [measure(n, args.matches, args.bot, args.opponent, args.workers, console,
                    args.first_deal)
            for n in sorted(set(args.players or PLAYER_COUNTS))]
    table = Table(title=f"{args.bot} vs {args.opponent}, duplicate deals")
    for column in ("players", "matches", "win rate", "target", "mean rank", "score - others",
                   "iter/decision", "slowest ms", "s/match", "wall s"):
        table.add_column(column, justify="right")
    for row in rows:
        ok = "white" if row["target"] is None else ("green" if row["meets_target"] else "red")
        table.add_row(str(row["players"]), str(row["matches"]),
                      f"[{ok}]{row['win_rate']:.1%} ± {row['win_rate_ci95']:.1%}[/]",
                      "-" if row["target"] is None else f"{row['target']:.0%}",
                      f"{row['mean_rank']:.2f} ± {row['mean_rank_ci95']:.2f}",
                      f"{row['score_diff']:+.1f} ± {row['score_diff_ci95']:.1f}",
                      f"{row['iterations_per_decision']:.0f}",
                      f"{row['slowest_answer_ms']:.0f}",
                      f"{row['seconds_per_match']:.2f}", f"{row['wall_s']:.0f}")
    console.print(table)
    console.print("[dim]win rate: the candidate ranks first, a shared first counting 1/k; "
                  "intervals are 95 % over per-deal means[/]")
    write_json(args.json, {"machine": platform.platform(), "python": sys.version.split()[0],
                           "bot": args.bot, "opponent": args.opponent,
                           "workers": args.workers, "rows": rows}, console)


if __name__ == "__main__":
    main()
