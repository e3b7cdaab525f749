"""Engine benchmark: match throughput and per-call medians, on one core.

Run as ``.venv/bin/python bench/engine.py --json bench/results/engine.json`` (``--quick`` for a
short run). Everything runs in this one process; no multiprocessing. ``--against REV`` instead
runs this tree's engine and REV's side by side, throughput and search speed, in child processes
(see ``bench/engine_against.py``).

Throughput: whole matches of uniformly random legal play on the engine (`random_playout`,
so the deal, the rotation choices, every observation and the bots' own use of the observation's
legal-move helpers are all inside the timed region) for 2, 3, 4 and 5 players over a fixed list
of seeds. A *decision* is one applied action (rotation choices are not counted).

Per-call medians: positions are sampled from seeded random-policy matches (only positions whose
sampled action does not end the round, so no timing includes dealing the next round). At each
position every operation is timed call by call with ``time.perf_counter_ns``; the median cost of
timing an empty call is subtracted. ``apply`` and the hot path run on clones made beforehand, so
the clone cost is not in them (``clone`` is timed on its own). The garbage collector is paused
while timing single calls and left on for the throughput runs.

Baselines, measured in the same run: ``random.choice`` over a list as long as the position's
legal-action list (per call), and a bare loop of such choices (per second) for the throughput.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import scout_arena
from common import warn_busy_machine, write_json
from engine_against import add_against_flags, against_main
from rich.console import Console
from rich.table import Table
from scout_rules import Action, Observation, Phase, State, moves

PLAYER_COUNTS = (2, 3, 4, 5)
HOT_PATH_TARGET_NS = 20_000
DECISIONS_TARGET_4P = 20_000.0

# Seeds per player count for the throughput runs (roughly 2-6 s each in full mode).
FULL_MATCHES = {2: 1500, 3: 600, 4: 400, 5: 260}
QUICK_MATCHES = {2: 200, 3: 80, 4: 40, 5: 30}
FULL_POSITIONS, QUICK_POSITIONS = 150, 20  # sampled positions per player count
FULL_REPS, QUICK_REPS = 30, 10  # timed calls per operation per position

JSON = dict[str, Any]


# ----- throughput -------------------------------------------------------------------------


def random_policy(rng: random.Random, observation: Observation) -> Action:
    """Uniform over the action kinds a seat has (Show, Scout, Scout & Show), then uniform within
    the kind, from the observation's own legal-move helpers: the cheapest sensible bot."""
    kinds: list[Sequence[Action]] = [k for k in (observation.legal_shows(),
                                                 observation.legal_scouts()) if k]
    if observation.can_scout_and_show():
        kinds.append(observation.legal_scout_and_shows())
    return rng.choice(rng.choice(kinds))


def random_playout(num_players: int, seed: int,
                   on_action: Callable[[State, int, Action], None] | None = None) -> State:
    """One match of random play (`random_policy`) straight on the engine, no bot layer: what
    the engine itself sustains. Rotations are a coin flip per seat."""
    rng = random.Random(seed)
    state = State.new(num_players, seed)
    while not state.is_over:
        if state.phase is Phase.ROTATION:
            for seat in range(num_players):
                state.choose_rotation(seat, rng.random() < 0.5)
            continue
        actor = state.current_seat
        assert actor is not None
        action = random_policy(rng, state.observation(actor))
        if on_action is not None:
            on_action(state, actor, action)
        state.apply(action)
    return state


def run_matches(num_players: int, seeds: Sequence[int]) -> JSON:
    """Play one random-playout match per seed; time the whole loop."""
    decisions = 0
    rounds = 0
    legal_total = 0
    c0 = time.process_time_ns()
    t0 = time.perf_counter_ns()
    for seed in seeds:
        state = random_playout(num_players, seed)
        for log in state.round_logs:
            decisions += len(log.actions)
        rounds += len(state.round_logs)
    elapsed = time.perf_counter_ns() - t0
    cpu = time.process_time_ns() - c0
    # Mean legal-action count per decision, for the random.choice baseline (untimed replay).
    sample = seeds[: min(len(seeds), 20)]
    sampled_decisions = 0
    for seed in sample:
        def count(state: State, actor: int, action: Action) -> None:
            nonlocal legal_total, sampled_decisions
            legal_total += len(state.legal_actions())
            sampled_decisions += 1

        random_playout(num_players, seed, count)
    seconds = elapsed / 1e9
    cpu_seconds = cpu / 1e9
    return {
        "players": num_players,
        "matches": len(seeds),
        "rounds": rounds,
        "decisions": decisions,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "matches_per_s": len(seeds) / seconds,
        "decisions_per_s": decisions / seconds,
        "decisions_per_cpu_s": decisions / cpu_seconds,
        "cpu_share": cpu_seconds / seconds,
        "decisions_per_match": decisions / len(seeds),
        "us_per_decision": elapsed / 1000 / decisions,
        "mean_legal_actions": legal_total / max(1, sampled_decisions),
    }


def choice_loop_rate(list_size: int, iterations: int) -> float:
    """Baseline: random.choice calls per CPU second in a bare loop over a list of
    ``list_size``."""
    rng = random.Random(1)
    items = list(range(max(1, list_size)))
    choice = rng.choice
    t0 = time.process_time_ns()
    for _ in range(iterations):
        choice(items)
    return iterations / ((time.process_time_ns() - t0) / 1e9)


# ----- sampled positions ------------------------------------------------------------------


@dataclass(slots=True)
class Position:
    players: int
    state: State
    action: Action
    num_legal: int


def sample_positions(num_players: int, count: int, rng: random.Random) -> list[Position]:
    """Positions from seeded random-policy matches, each with the action chosen there."""
    out: list[Position] = []

    def sample(state: State, actor: int, action: Action) -> None:
        # Once ``count`` are in, the match is played out without drawing from ``rng``.
        if len(out) < count and rng.random() < 0.15:
            probe = state.clone()
            probe.apply(action)
            if probe.round_index == state.round_index and not probe.is_over:
                out.append(Position(num_players, state.clone(), action,
                                    len(state.legal_actions())))

    seed = 10_000 * num_players
    while len(out) < count:
        random_playout(num_players, seed, on_action=sample)
        seed += 1
    return out


# ----- per-call timing --------------------------------------------------------------------


def _noop() -> None:
    return None


def timed(fn: Callable[[], object], reps: int) -> list[int]:
    """Nanoseconds of ``reps`` separate calls of ``fn`` (raw, overhead not yet removed)."""
    out: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(reps):
        t0 = clock()
        fn()
        t1 = clock()
        out.append(t1 - t0)
    return out


def timed_each(fn: Callable[[State, Action], object], states: Sequence[State],
               action: Action) -> list[int]:
    """Nanoseconds of ``fn(state, action)`` once on each of ``states`` (pre-made clones)."""
    out: list[int] = []
    clock = time.perf_counter_ns
    for s in states:
        t0 = clock()
        fn(s, action)
        t1 = clock()
        out.append(t1 - t0)
    return out


def _apply(state: State, action: Action) -> None:
    state.apply(action)


def hot_path(state: State, action: Action) -> None:
    """The referee's per-decision work: check and apply the action, then build what the next
    seat to act is sent (its observation, its legal Shows and Scouts)."""
    state.check(action)
    state.apply(action)
    seat = state.current_seat
    assert seat is not None
    obs = state.observation(seat)
    obs.legal_shows()
    obs.legal_scouts()


def hot_path_single_check(state: State, action: Action) -> None:
    """As `hot_path` without the separate check (``apply`` checks the action itself)."""
    state.apply(action)
    seat = state.current_seat
    assert seat is not None
    obs = state.observation(seat)
    obs.legal_shows()
    obs.legal_scouts()


REQUIRED_OPS = (
    "State.legal_actions()", "State.legal_shows()", "State.legal_scouts()",
    "State.check(action)", "State.apply(action)", "State.observation(seat)",
    "hot path",
)
EXTRA_OPS = (
    "State.clone()", "hot path without separate check", "Observation.legal_shows()",
    "Observation.can_scout_and_show()", "random policy(observation)",
)
BASELINE_OP = "baseline: random.choice(list of len(legal_actions))"


def measure_position(pos: Position, reps: int, policy: random.Random) -> dict[str, list[int]]:
    s, a = pos.state, pos.action
    seat = s.current_seat
    assert seat is not None
    obs = s.observation(seat)
    items = list(range(max(1, pos.num_legal)))
    choice = random.Random(7).choice
    samples: dict[str, list[int]] = {
        "State.legal_actions()": timed(s.legal_actions, reps),
        "State.legal_shows()": timed(s.legal_shows, reps),
        "State.legal_scouts()": timed(s.legal_scouts, reps),
        "State.check(action)": timed(lambda: s.check(a), reps),
        "State.observation(seat)": timed(lambda: s.observation(seat), reps),
        "State.clone()": timed(s.clone, reps),
        "Observation.legal_shows()": timed(obs.legal_shows, reps),
        "Observation.can_scout_and_show()": timed(obs.can_scout_and_show, reps),
        "random policy(observation)": timed(lambda: random_policy(policy, obs), reps),
        BASELINE_OP: timed(lambda: choice(items), reps),
    }
    samples["State.apply(action)"] = timed_each(_apply, [s.clone() for _ in range(reps)], a)
    samples["hot path"] = timed_each(hot_path, [s.clone() for _ in range(reps)], a)
    samples["hot path without separate check"] = timed_each(
        hot_path_single_check, [s.clone() for _ in range(reps)], a)
    return samples


def summarize(values: Sequence[float]) -> JSON:
    ordered = sorted(values)
    k = len(ordered)
    return {
        "median_ns": statistics.median(ordered),
        "p10_ns": ordered[k // 10],
        "p90_ns": ordered[(9 * k) // 10],
        "mean_ns": statistics.fmean(ordered),
        "samples": k,
    }


def run_micro(positions_per_count: int, reps: int) -> JSON:
    rng = random.Random(2026)
    policy = random.Random(99)
    # Timer + call overhead, subtracted from every sample.
    gc.disable()
    try:
        for _ in range(3):
            timed(_noop, 20_000)
        overhead = int(statistics.median(timed(_noop, 50_000)))
        by_count: dict[int, dict[str, list[float]]] = {}
        positions_info: dict[int, JSON] = {}
        for n in PLAYER_COUNTS:
            gc.enable()
            positions = sample_positions(n, positions_per_count, rng)
            gc.collect()
            gc.disable()
            # Warm-up on a few positions.
            for pos in positions[:5]:
                measure_position(pos, 2, policy)
            acc: dict[str, list[float]] = {}
            for pos in positions:
                for op, raw in measure_position(pos, reps, policy).items():
                    acc.setdefault(op, []).extend(max(0, t - overhead) for t in raw)
                gc.collect()
            by_count[n] = acc
            positions_info[n] = {
                "positions": len(positions),
                "mean_hand_size": statistics.fmean(
                    len(p.state.hands[p.state.current_seat or 0]) for p in positions),
                "mean_legal_actions": statistics.fmean(p.num_legal for p in positions),
            }
    finally:
        gc.enable()
    ops = [*REQUIRED_OPS, *EXTRA_OPS, BASELINE_OP]
    result: JSON = {"timer_overhead_ns": overhead, "reps_per_position": reps,
                    "positions": {str(n): positions_info[n] for n in PLAYER_COUNTS},
                    "ops": {}}
    for op in ops:
        pooled = [t for n in PLAYER_COUNTS for t in by_count[n][op]]
        entry = {"all": summarize(pooled)}
        entry.update({f"{n}p": summarize(by_count[n][op]) for n in PLAYER_COUNTS})
        result["ops"][op] = entry
    base = result["ops"][BASELINE_OP]
    for op in ops:
        entry = result["ops"][op]
        for key in ("all", *(f"{n}p" for n in PLAYER_COUNTS)):
            b = base[key]["median_ns"]
            entry[key]["ratio_to_baseline"] = entry[key]["median_ns"] / b if b else None
    return result


# ----- report -----------------------------------------------------------------------------


def fmt_us(ns: float) -> str:
    return f"{ns / 1000:.2f}"


def verdict(ok: bool) -> str:
    return "[bold green]PASS[/]" if ok else "[bold yellow]BELOW[/]"


LABELS = {
    "State.legal_actions()": "legal_actions()",
    "State.legal_shows()": "legal_shows()",
    "State.legal_scouts()": "legal_scouts()",
    "State.check(action)": "check(action)",
    "State.apply(action)": "apply(action)*",
    "State.observation(seat)": "observation(seat)",
    "hot path": "HOT PATH",
    "State.clone()": "clone()",
    "hot path without separate check": "hot path, no 2nd check",
    "Observation.legal_shows()": "obs.legal_shows()",
    "Observation.can_scout_and_show()": "obs.can_s&s()",
    "random policy(observation)": "random policy(obs)",
    BASELINE_OP: "baseline random.choice",
}


def report(console: Console, data: JSON) -> None:
    thr = Table(title="Whole matches, random policy in every seat, one core")
    for col in ("n", "matches", "dec/m", "match/s", "dec/s", "dec/CPU-s", "choice/s",
                "÷choice"):
        thr.add_column(col, justify="right")
    for row in data["throughput"]:
        thr.add_row(str(row["players"]), str(row["matches"]),
                    f"{row['decisions_per_match']:.0f}", f"{row['matches_per_s']:.1f}",
                    f"{row['decisions_per_s']:,.0f}", f"{row['decisions_per_cpu_s']:,.0f}",
                    f"{row['baseline_choices_per_s'] / 1e6:.2f}M",
                    f"{row['decision_cost_in_choices']:.0f}x")
    console.print(thr)
    console.print("[dim]dec/m: decisions (applied actions) per match; match/s and dec/s: wall "
                  "clock; dec/CPU-s: per CPU second of this process; choice/s: a bare loop of "
                  "random.choice over a list of the mean legal-action count (CPU time); "
                  "÷choice: one decision costs this many such choices[/]")
    busy = [r["players"] for r in data["throughput"] if r["cpu_share"] < 0.9]
    if busy:
        warn_busy_machine(console, f"the process had under 90% of a core during the {busy} "
                          "player runs (the machine is busy)", "wall-clock rates are "
                          "pessimistic, the CPU-time rates are the better estimate")

    micro = data["micro"]
    tab = Table(title="Median µs per call at sampled positions")
    tab.add_column("operation")
    tab.add_column("all", justify="right")
    for n in PLAYER_COUNTS:
        tab.add_column(f"{n}p", justify="right")
    tab.add_column("p90", justify="right")
    tab.add_column("x base", justify="right")
    ops: dict[str, JSON] = micro["ops"]
    for op, entry in ops.items():
        if op == EXTRA_OPS[0] or op == BASELINE_OP:
            tab.add_section()
        style = "dim" if op == BASELINE_OP else ("bold" if op == "hot path" else "")
        ratio = entry["all"]["ratio_to_baseline"]
        tab.add_row(
            LABELS.get(op, op),
            fmt_us(entry["all"]["median_ns"]),
            *(fmt_us(entry[f"{n}p"]["median_ns"]) for n in PLAYER_COUNTS),
            fmt_us(entry["all"]["p90_ns"]),
            f"{ratio:.1f}" if ratio is not None else "-",
            style=style,
        )
    console.print(tab)
    console.print(
        f"[dim]per call, timer overhead {micro['timer_overhead_ns']} ns subtracted; "
        f"'all' pools {PLAYER_COUNTS[0]}-{PLAYER_COUNTS[-1]} players; p90 of 'all'; "
        "x base = median ÷ random.choice median. HOT PATH = check + apply + next seat's "
        "observation + its legal Shows and Scouts. HOT PATH and * are timed on pre-made clones "
        "(clone cost excluded; apply runs its own check too). Rows below the first rule are "
        "extras.[/]")

    t = data["targets"]
    console.print(
        f"hot path median {t['hot_path_median_us']:.2f} µs "
        f"(target <= {HOT_PATH_TARGET_NS / 1000:.0f} µs): "
        f"{verdict(t['hot_path_pass'])}")
    console.print(
        f"4-player random matches {t['decisions_per_s_4p']:,.0f} decisions per CPU second "
        f"({t['decisions_per_wall_s_4p']:,.0f}/s wall clock) "
        f"(target >= {DECISIONS_TARGET_4P:,.0f}): {verdict(t['decisions_4p_pass'])}")
    console.print(f"[dim]total benchmark time {data['elapsed_s']:.1f} s[/]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    parser.add_argument("--quick", action="store_true", help="a short run (about 10 s)")
    add_against_flags(parser)
    args = parser.parse_args(argv)
    console = Console()
    started = time.perf_counter()

    matches = QUICK_MATCHES if args.quick else FULL_MATCHES
    if args.against or args.child:
        return against_main(args, matches, console)
    throughput: list[JSON] = []
    for n in PLAYER_COUNTS:
        run_matches(n, list(range(5_000, 5_003)))  # warm-up
        row = run_matches(n, list(range(1, matches[n] + 1)))
        size = round(row["mean_legal_actions"])
        row["baseline_choice_list_size"] = size
        row["baseline_choices_per_s"] = choice_loop_rate(size, 200_000 if args.quick
                                                         else 1_000_000)
        row["decision_cost_in_choices"] = (row["baseline_choices_per_s"]
                                           / row["decisions_per_cpu_s"])
        throughput.append(row)
        console.print(f"[dim]{n} players: {row['matches']} matches in {row['seconds']:.2f} s[/]")

    micro = run_micro(QUICK_POSITIONS if args.quick else FULL_POSITIONS,
                      QUICK_REPS if args.quick else FULL_REPS)
    hot_ns = micro["ops"]["hot path"]["all"]["median_ns"]
    row_4p = next(r for r in throughput if r["players"] == 4)
    dps_4p = row_4p["decisions_per_cpu_s"]
    data: JSON = {
        "benchmark": "scout-arena engine",
        "mode": "quick" if args.quick else "full",
        "scout_arena_version": scout_arena.__version__,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "compiled_engine": moves.COMPILED,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "throughput": throughput,
        "micro": micro,
        "targets": {
            "hot_path_median_us": hot_ns / 1000,
            "hot_path_target_us": HOT_PATH_TARGET_NS / 1000,
            "hot_path_pass": hot_ns <= HOT_PATH_TARGET_NS,
            "decisions_per_s_4p": dps_4p,
            "decisions_per_s_4p_basis": "decisions per CPU second of this process",
            "decisions_per_wall_s_4p": row_4p["decisions_per_s"],
            "decisions_per_s_4p_target": DECISIONS_TARGET_4P,
            "decisions_4p_pass": dps_4p >= DECISIONS_TARGET_4P,
        },
    }
    data["elapsed_s"] = time.perf_counter() - started
    report(console, data)
    if args.json:
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
