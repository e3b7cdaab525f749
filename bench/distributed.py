"""Distributed tournament benchmark: the same tournament on one node, on ``--nodes 2`` and on a
local Ray cluster of two nodes (one CPU each, started here on 127.0.0.N and stopped after).

Run as ``.venv/bin/python bench/distributed.py --json bench/results/distributed.json``
(``--quick`` for a short run). Four greedy bots at 4-player tables, duplicate deals. Each node
plays ``concurrency`` matches at once, so two nodes run twice as many as the local run at the
same setting; the local run is also measured at twice the concurrency. Matches per minute
count the whole run (``wall``: bots' start-up on every node, scheduling, and for Ray the
connection to the cluster), and the playing time the runner reports (``play``). Ray's
overhead per match is the extra wall time of the Ray run over the ``--nodes 2`` run, per match:
both have two nodes; Ray adds its task scheduling, a bot start-up per chunk instead of per node,
and the trip of the records through its object store. The cluster's own start-up is shown
apart and counted nowhere else. The machine has 2 cores, shared: the figures say what each
layer costs, not how it scales. The chunk boundary of ``--nodes`` (issue 30): ``--nodes 1``
in chunks of ``--chunk-size`` against one chunk, the difference per boundary in idle match
slots (from the records' start and end times: wall times on this shared machine vary by more
than the boundaries cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from scout_arena.record import read_record_json
from scout_arena.tournament import BotSpec, Tournament, TournamentConfig

JSON = dict[str, Any]


def run_mode(name: str, games: int, concurrency: int, **where: Any) -> JSON:
    """One tournament; ``where``: the `Tournament`'s nodes / ray_address / chunk_size."""
    bots = tuple(BotSpec(f"greedy{i}", "greedy") for i in range(4))
    config = TournamentConfig(bots, players=4, games=games, concurrency=concurrency, seed=7,
                              decision_ms=5000, time_bank_ms=30_000)
    with tempfile.TemporaryDirectory() as out:
        tournament = Tournament(config, Path(out), show_progress=False, **where)
        started = time.perf_counter()
        summary = asyncio.run(tournament.run()).to_json()
        wall = time.perf_counter() - started
        spans = [(r["meta"]["created_at"], r["meta"]["ended_at"]) for r in
                 (read_record_json(p) for p in (Path(out) / "records").glob("*.json"))]
    matches = summary["matches_finished"]
    assert matches == summary["matches_total"], summary.get("error")
    play = summary["play_s"]
    return {"mode": name, "concurrency_per_node": concurrency, "matches": matches,
            "wall_s": round(wall, 2), "play_s": play,
            "matches_per_min_wall": round(60 * matches / wall, 1),
            "matches_per_min_play": round(60 * matches / play, 1) if play else None,
            "timeouts": sum(row["timeouts"] for row in summary["standings"]),
            "chunk_size": where.get("chunk_size"),
            "idle_seat_s": round(idle_seat_s(spans, concurrency * where.get("nodes", 1)), 3)}


def idle_seat_s(spans: list[tuple[float, float]], seats: int) -> float:
    """Seconds x free match slots from the first match's start to the last one's: how long
    slots stood empty while matches were still to start (the run's tail is not counted)."""
    if not spans:
        return 0.0
    last_start = max(start for start, _ in spans)
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    idle, running, at = 0.0, 0, events[0][0]
    for when, step in events:
        if when > last_start:
            idle += max(0, seats - running) * (last_start - at)
            break
        idle += max(0, seats - running) * (when - at)
        running, at = running + step, when
    return idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, default=Path("bench/results/distributed.json"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray cluster run")
    parser.add_argument("--chunk-size", type=int, default=10,
                        help="matches per chunk of the chunked --nodes 1 run (default 10)")
    args = parser.parse_args()
    games = 3 if args.quick else 12
    rows = [run_mode("local", games, 2), run_mode("local", games, 4),
            run_mode("--nodes 2", games, 2, nodes=2),
            run_mode("--nodes 1, one chunk", games, 2, nodes=1, chunk_size=10**6),
            run_mode(f"--nodes 1, chunks of {args.chunk_size}", games, 2, nodes=1,
                     chunk_size=args.chunk_size)]
    one, chunked = rows[3], rows[4]
    boundaries = max(1, -(-chunked["matches"] // args.chunk_size) - 1)
    per_boundary = (chunked["idle_seat_s"] - one["idle_seat_s"]) / boundaries
    cluster_start = overhead = None
    if not args.no_ray:
        from scout_arena.tournament.raycluster import LocalRayCluster

        cluster = LocalRayCluster(num_cpus=1)
        started = time.perf_counter()
        try:
            cluster.start()
            cluster.add_worker()
            cluster_start = time.perf_counter() - started
            rows.append(run_mode("--ray (2 nodes)", games, 2, ray_address=cluster.address))
        finally:
            cluster.stop()
        overhead = (rows[-1]["wall_s"] - rows[2]["wall_s"]) / rows[-1]["matches"]
    table = Table(title="Distributed tournaments: four greedy bots, 4-player tables, "
                        "duplicate deals")
    for column in ("mode", "per node", "matches", "wall s", "playing s", "matches/min (wall)",
                   "matches/min (playing)", "timeouts", "idle slot s"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for row in rows:
        table.add_row(row["mode"], str(row["concurrency_per_node"]), str(row["matches"]),
                      f"{row['wall_s']:.1f}", f"{row['play_s']:.1f}",
                      f"{row['matches_per_min_wall']:.0f}",
                      f"{row['matches_per_min_play']:.0f}", str(row["timeouts"]),
                      f"{row['idle_seat_s']:.2f}")
    console = Console(width=140)
    console.print(table)
    console.print(f"--nodes 1 chunk boundary: {per_boundary:+.3f} slot-seconds idle each "
                  f"({boundaries} boundaries; idle slots of the chunked run over the one-chunk "
                  "run's: time x match slots left empty while matches were still to start)")
    if cluster_start is not None and overhead is not None:
        console.print(f"Ray cluster start-up (head + worker): {cluster_start:.1f} s; Ray's "
                      f"overhead over --nodes 2: {overhead:+.2f} s per match")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": platform.platform(), "quick": args.quick, "modes": rows,
        "nodes_chunk_boundary_s": round(per_boundary, 3),
        "ray_cluster_start_s": None if cluster_start is None else round(cluster_start, 1),
        "ray_overhead_s_per_match_vs_nodes":
            None if overhead is None else round(overhead, 3)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
