"""Ladder benchmark: TrueSkill updates per second, matchmaking time, and a full recompute.

Run as ``.venv/bin/python bench/ladder.py --json bench/results/ladder.json`` (``--quick`` for a
short run). Measures, side by side in one run:

* rating updates per second for 2- and 5-player tables through `rate_table` (the ladder's own
  path, with its explicit TrueSkill environment), beside the bare `trueskill.rate` call;
* the time to choose one table among 1,000 and 10,000 idle bots (`choose_table`, median of
  repeated choices), beside a bare `random.sample` of the same table size;
* the time to recompute every rating from 100,000 stored matches (10,000 with ``--quick``) in a
  SQLite ladder database: read the history through the repository, replay it, compare.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trueskill
from common import write_json
from rich.console import Console
from rich.table import Table
from scout_arena.ratings import Rating, make_env, rate_table, replay_ratings
from scout_ladder.matchmaker import Candidate, MatchmakerConfig, choose_table

JSON = dict[str, Any]


def bench_rating(table_size: int, updates: int) -> JSON:
    env = make_env()
    rng = random.Random(table_size)
    tables = [[Rating(rng.uniform(15, 35), rng.uniform(1, 8)) for _ in range(table_size)]
              for _ in range(updates)]
    ranks = [rng.sample(range(1, table_size + 1), table_size) for _ in range(updates)]
    started = time.perf_counter()
    for before, rank in zip(tables, ranks, strict=True):
        rate_table(env, before, rank)
    ours = time.perf_counter() - started
    raw_env = trueskill.TrueSkill(backend=None)
    groups = [[(raw_env.create_rating(r.mu, r.sigma),) for r in t] for t in tables]
    started = time.perf_counter()
    for group, rank in zip(groups, ranks, strict=True):
        raw_env.rate(group, ranks=[r - 1 for r in rank])
    raw = time.perf_counter() - started
    return {"table_size": table_size, "updates": updates,
            "updates_per_s": round(updates / ours, 1), "raw_updates_per_s": round(updates / raw, 1),
            "ratio_vs_raw": round(raw / ours, 3)}


def bench_matchmaking(bots: int, repeats: int) -> JSON:
    rng = random.Random(bots)
    candidates = [Candidate(f"bot{i}", f"owner{i // 3}", rng.gauss(25, 5), rng.uniform(1, 8),
                            rng.randrange(0, 500), rng.uniform(0, 60)) for i in range(bots)]
    config = MatchmakerConfig(table_sizes=(2, 3, 4, 5))
    times, raw_times = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        table = choose_table(candidates, config, rng)
        times.append(time.perf_counter() - started)
        assert table is not None
        started = time.perf_counter()
        rng.sample(candidates, len(table))
        raw_times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {"bots": bots, "repeats": repeats, "median_ms": round(1000 * median, 3),
            "raw_sample_median_ms": round(1000 * statistics.median(raw_times), 4)}


def bench_recompute(matches: int) -> JSON:
    from scout_ladder.repository import Repository

    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as folder:
        repo = Repository(f"sqlite:///{folder}/bench.db")
        repo.migrate()
        names = [f"bot{i}" for i in range(40)]
        for i, name in enumerate(names):
            repo.register_bot(name, f"owner{i}")
        started = time.perf_counter()
        history = fill_history(repo, names, matches, rng)
        filled = time.perf_counter() - started
        started = time.perf_counter()
        stored = [(m.bots, m.ranks) for m in repo.iter_finished_matches() if m.rated]
        read = time.perf_counter() - started
        started = time.perf_counter()
        ratings, _ = replay_ratings(stored)
        replayed = time.perf_counter() - started
        repo.close()
    assert len(stored) == matches and len(ratings) == len(names) and history == matches
    return {"matches": matches, "fill_s": round(filled, 2), "read_s": round(read, 2),
            "replay_s": round(replayed, 2), "recompute_s": round(read + replayed, 2),
            "matches_per_s": round(matches / (read + replayed), 1)}


def fill_history(repo: Any, names: list[str], matches: int, rng: random.Random) -> int:
    """Write ``matches`` finished, rated 2-5 player matches straight into the ladder's tables
    (SQLAlchemy core, one transaction), so the read and replay are timed on a real database of
    that size; going through `finish_match` one by one would take far longer than the thing
    measured."""
    from datetime import UTC, datetime, timedelta

    from scout_ladder.models import Bot, Match, MatchSeat
    from sqlalchemy import create_engine, insert, select

    engine = create_engine(repo.url.replace("***", ""))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as connection:
        ids = {name: bot_id for name, bot_id in connection.execute(select(Bot.name, Bot.id))}
        match_rows, seat_rows = [], []
        for i in range(matches):
            size = rng.choice((2, 3, 4, 5))
            bots = rng.sample(names, size)
            ranks = rng.sample(range(1, size + 1), size)
            when = start + timedelta(seconds=i)
            match_rows.append({"id": f"bench-{i:06d}", "status": "finished", "table_size": size,
                               "seed": i, "rated": True, "challenge_id": None,
                               "created_at": when, "finished_at": when, "void_reason": None,
                               "record_json": "{}"})
            seat_rows += [{"match_id": f"bench-{i:06d}", "seat": seat, "bot_id": ids[bot],
                           "bot_version": 1, "score": 0, "rank": rank, "forfeited": False,
                           "timeouts": 0, "illegal_actions": 0}
                          for seat, (bot, rank) in enumerate(zip(bots, ranks, strict=True))]
        connection.execute(insert(Match), match_rows)
        connection.execute(insert(MatchSeat), seat_rows)
    engine.dispose()
    return matches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/ladder.json"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    updates = 500 if args.quick else 3000
    rating = [bench_rating(size, updates) for size in (2, 5)]
    making = [bench_matchmaking(bots, 20 if args.quick else 100) for bots in (1000, 10_000)]
    recompute = bench_recompute(10_000 if args.quick else 100_000)
    console = Console(width=120)
    table = Table(title="TrueSkill updates (ladder path vs bare trueskill.rate)")
    for col in ("table size", "updates/s", "bare updates/s", "ratio"):
        table.add_column(col, justify="right")
    for row in rating:
        table.add_row(str(row["table_size"]), f"{row['updates_per_s']:.0f}",
                      f"{row['raw_updates_per_s']:.0f}", f"{row['ratio_vs_raw']:.2f}")
    console.print(table)
    table = Table(title="Choosing one table among idle bots (median)")
    for col in ("idle bots", "choose_table ms", "bare random.sample ms"):
        table.add_column(col, justify="right")
    for row in making:
        table.add_row(str(row["bots"]), f"{row['median_ms']:.3f}",
                      f"{row['raw_sample_median_ms']:.4f}")
    console.print(table)
    console.print(f"recompute {recompute['matches']:,} stored matches: read "
                  f"{recompute['read_s']:.2f} s + replay {recompute['replay_s']:.2f} s = "
                  f"{recompute['recompute_s']:.2f} s ({recompute['matches_per_s']:.0f} matches/s;"
                  f" filling the database took {recompute['fill_s']:.1f} s)")
    write_json(args.json, {"machine": platform.platform(), "quick": args.quick,
                           "rating": rating, "matchmaking": making, "recompute": recompute})


if __name__ == "__main__":
    main()
