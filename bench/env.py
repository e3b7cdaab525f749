"""Environment benchmark: decisions per second of random masked play in the PettingZoo AEC
environment and the OpenSpiel game, against the bare engine in the same run, on one core.

Run as ``.venv/bin/python bench/env.py --json bench/results/env.json`` (``--quick`` for a short
run). Every runner plays whole matches over the same seeds, a uniformly random legal decision at
every step, and counts every decision including the rotation choices:

- engine: `State` directly, a random entry of ``legal_actions()`` (rotations a coin flip);
- pettingzoo: `ScoutEnv` through ``agent_iter``/``last``/``step``, a random id of the mask
  (so each step includes building the observation vector and the mask);
- openspiel: ``python_scout`` through ``legal_actions``/``apply_action``, chance nodes sampled
  by their probabilities (the deal's chance nodes are in the timed region, not in the count).

The random policies differ (uniform over actions, over mask ids, over OpenSpiel ids: the same
thing for the two environments), so matches differ in length; the rates are per decision.
Medians are over matches of the per-match decision rate. The records check then plays
thousands of PettingZoo episodes (``RECORD_EPISODES``) and replays every episode's record.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyspiel
import scout_arena
from common import warn_busy_machine, write_json
from rich.console import Console
from rich.table import Table
from scout_arena.env.aec import ScoutEnv
from scout_arena.env.spiel import ScoutGame
from scout_arena.record import RecordError, record_to_json, replay
from scout_rules import Phase, State

JSON = dict[str, Any]
PLAYER_COUNTS = (2, 3, 4, 5)
FULL_MATCHES = {2: 300, 3: 150, 4: 40, 5: 30}
QUICK_MATCHES = {2: 40, 3: 20, 4: 6, 5: 5}
RECORD_EPISODES = {2: 1500, 3: 800, 4: 120, 5: 80}
QUICK_RECORD_EPISODES = {2: 100, 3: 50, 4: 10, 5: 8}

Runner = Callable[[int, int], int]
"""(players, seed) -> decisions of one whole match."""


def engine_match(players: int, seed: int) -> int:
    rng = random.Random(seed)
    state = State.new(players, seed)
    decisions = 0
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(players):
                state.choose_rotation(seat, rng.random() < 0.5)
            decisions += players
            continue
        state.apply(rng.choice(state.legal_actions()))
        decisions += 1
    return decisions


def pettingzoo_runner() -> Runner:
    envs = {n: ScoutEnv(n) for n in PLAYER_COUNTS}

    def run(players: int, seed: int) -> int:
        env = envs[players]
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        decisions = 0
        for _ in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            decisions += 1
        return decisions

    return run


def openspiel_runner() -> Runner:
    games = {n: pyspiel.load_game("python_scout", {"players": n}) for n in PLAYER_COUNTS}

    def run(players: int, seed: int) -> int:
        rng = random.Random(seed)
        state = games[players].new_initial_state()
        decisions = 0
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes = state.chance_outcomes()
                state.apply_action(outcomes[rng.randrange(len(outcomes))][0])
                continue
            state.apply_action(rng.choice(state.legal_actions()))
            decisions += 1
        return decisions

    return run


def measure(run: Runner, players: int, seeds: Sequence[int]) -> JSON:
    rates: list[float] = []
    decisions = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for seed in seeds:
        m0 = time.perf_counter()
        made = run(players, seed)
        rates.append(made / (time.perf_counter() - m0))
        decisions += made
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"matches": len(seeds), "decisions": decisions, "seconds": seconds,
            "decisions_per_s": decisions / seconds, "decisions_per_cpu_s": decisions / cpu,
            "median_decisions_per_s": statistics.median(rates), "cpu_share": cpu / seconds,
            "decisions_per_match": decisions / len(seeds)}


def check_records(players: int, episodes: int) -> JSON:
    """Random PettingZoo episodes, each one's record replayed through `replay()`."""
    env = ScoutEnv(players)
    rng = np.random.default_rng(players)
    failures: list[str] = []
    t0 = time.perf_counter()
    for episode in range(episodes):
        env.reset(seed=episode)
        for _ in env.agent_iter():
            obs, _, terminated, _, _ = env.last()
            env.step(None if terminated
                     else int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        try:
            result = replay(record_to_json(env.match_record()))
            if result.state.scores != env.match.scores:
                failures.append(f"seed {episode}: replayed scores differ")
        except RecordError as exc:
            failures.append(f"seed {episode}: {exc}")
    return {"players": players, "episodes": episodes, "failures": failures,
            "seconds": time.perf_counter() - t0}


def report(console: Console, data: JSON) -> None:
    table = Table(title="Random legal play, decisions per second (one core)")
    for col in ("n", "engine", "median", "PZ", "median", "slower", "OS", "median", "slower"):
        table.add_column(col, justify="right")
    for row in data["rates"]:
        e, p, o = row["engine"], row["pettingzoo"], row["openspiel"]
        table.add_row(str(row["players"]),
                      f"{e['decisions_per_s']:,.0f}", f"{e['median_decisions_per_s']:,.0f}",
                      f"{p['decisions_per_s']:,.0f}", f"{p['median_decisions_per_s']:,.0f}",
                      f"{row['pettingzoo_slowdown']:.1f}x",
                      f"{o['decisions_per_s']:,.0f}", f"{o['median_decisions_per_s']:,.0f}",
                      f"{row['openspiel_slowdown']:.1f}x")
    console.print(table)
    console.print("[dim]decisions per second (rotations included, wall time) of the bare "
                  "engine, the PettingZoo env (PZ) and the OpenSpiel game (OS); median: of the "
                  "per-match rates; slower: engine rate / environment rate[/]")
    busy = [r["players"] for r in data["rates"]
            if min(r[k]["cpu_share"] for k in ("engine", "pettingzoo", "openspiel")) < 0.9]
    if busy:
        warn_busy_machine(console, f"under 90% of a core during the {busy} player runs",
                          "the ratios (measured side by side) hold better than the rates")
    records = data["records"]
    total = sum(r["episodes"] for r in records)
    failed = sum(len(r["failures"]) for r in records)
    counts = ", ".join(f"{r['players']}p {r['episodes']}" for r in records)
    console.print(f"records: {total} PettingZoo episodes ({counts}), "
                  f"every record replayed: "
                  + ("[bold green]all pass[/]" if not failed else f"[bold red]{failed} fail[/]"))
    console.print(f"[dim]total benchmark time {data['elapsed_s']:.1f} s[/]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    parser.add_argument("--quick", action="store_true", help="a short run")
    args = parser.parse_args(argv)
    console = Console()
    started = time.perf_counter()
    matches = QUICK_MATCHES if args.quick else FULL_MATCHES
    runners: dict[str, Runner] = {"engine": engine_match, "pettingzoo": pettingzoo_runner(),
                                  "openspiel": openspiel_runner()}
    rates: list[JSON] = []
    for n in PLAYER_COUNTS:
        seeds = list(range(1, matches[n] + 1))
        row: JSON = {"players": n}
        for name, run in runners.items():
            run(n, 10_000)  # warm-up
            row[name] = measure(run, n, seeds)
        base = row["engine"]["decisions_per_s"]
        row["pettingzoo_slowdown"] = base / row["pettingzoo"]["decisions_per_s"]
        row["openspiel_slowdown"] = base / row["openspiel"]["decisions_per_s"]
        rates.append(row)
        console.print(f"[dim]{n} players: {matches[n]} matches per runner[/]")
    episodes = QUICK_RECORD_EPISODES if args.quick else RECORD_EPISODES
    records = [check_records(n, episodes[n]) for n in PLAYER_COUNTS]
    data: JSON = {
        "benchmark": "scout-arena environments",
        "mode": "quick" if args.quick else "full",
        "scout_arena_version": scout_arena.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "openspiel_game": ScoutGame.__name__,
        "rates": rates,
        "records": records,
    }
    data["elapsed_s"] = time.perf_counter() - started
    report(console, data)
    if args.json:
        write_json(args.json, data, console)
    return 1 if any(r["failures"] for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
