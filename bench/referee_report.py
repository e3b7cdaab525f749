"""The tables bench/referee.py prints, and the reading of its cProfile output."""

from __future__ import annotations

from common import warn_busy_machine
from referee_setup import HEADLINE_CONCURRENCY, RATIO_GOAL
from rich.console import Console
from rich.table import Table
from trivial_bot import (
    JSON,
)

# ----- report -------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "[bold green]PASS[/]" if ok else "[bold yellow]BELOW[/]"


def report(console: Console, data: JSON) -> None:
    table = Table(title="Refereed 4-player matches vs raw grpc.aio ping-pong, loopback")
    for col in (
        "conc",
        "refereed dec/s",
        "p50 ms",
        "p99 ms",
        "raw rt/s",
        "raw p50",
        "raw p99",
        "ratio",
    ):
        table.add_column(col, justify="right")
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        table.add_row(
            str(level["concurrency"]),
            f"{ref['decisions_per_s']:,.0f}",
            f"{ref['latency']['p50_ms']:.2f}",
            f"{ref['latency']['p99_ms']:.2f}",
            f"{raw['round_trips_per_s']:,.0f}",
            f"{raw['latency']['p50_ms']:.2f}",
            f"{raw['latency']['p99_ms']:.2f}",
            f"{level['ratio']:.2f}",
            style="bold" if level["concurrency"] == HEADLINE_CONCURRENCY else "",
        )
    console.print(table)
    loops = list(data["levels"][0].get("refereed_by_event_loop", {}))
    if len(loops) > 1:
        side = Table(title="The referee and its bots on each event loop, side by side")
        side.add_column("conc", justify="right")
        for loop in loops:
            for col in ("dec/s", "p99 ms", "ratio", "ref µs/dec"):
                side.add_column(f"{loop} {col}", justify="right")
        for level in data["levels"]:
            cells = [str(level["concurrency"])]
            for loop in loops:
                r = level["refereed_by_event_loop"][loop]
                cells += [
                    f"{r['decisions_per_s']:,.0f}",
                    f"{r['latency']['p99_ms']:.2f}",
                    f"{level['ratio_by_event_loop'][loop]:.2f}",
                    f"{r['referee_cpu_us_per_decision']:.0f}",
                ]
            side.add_row(*cells)
        console.print(side)
    payload = data["payload"]
    console.print(
        "[dim]conc: running matches (refereed) = open streams (raw). refereed dec/s: turn "
        "answers accepted per second, all bots (lean streams, the SDK default); p50/p99: from "
        "a seat's ActionChoice written to the match's next request reaching the next seat. "
        f"Refereed columns: the {data['levels'][0].get('event_loop', 'asyncio')} event loop. "
        "raw rt/s, p50/p99: a client writes a "
        f"{payload['payload_bytes']}-byte DecisionRequest (mean of sampled requests "
        f"{payload['mean_bytes']:.0f} B), the server answers {payload['reply_bytes']} B; from "
        "write to reply. ratio = refereed dec/s / raw rt/s.[/]"
    )

    cpu = Table(title="CPU: share of one core, and µs per decision / round trip")
    for col in (
        "conc",
        "referee",
        "µs/dec",
        "bots",
        "µs/dec ",
        "raw server",
        "µs/rt",
        "clients",
        "µs/rt ",
    ):
        cpu.add_column(col, justify="right")
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        cpu.add_row(
            str(level["concurrency"]),
            f"{ref['cpu_share']['referee']:.0%}",
            f"{ref['referee_cpu_us_per_decision']:.0f}",
            f"{ref['cpu_share']['bots']:.0%}",
            f"{ref['bots_cpu_us_per_decision']:.0f}",
            f"{raw['cpu_share']['server']:.0%}",
            f"{raw['server_cpu_us_per_round_trip']:.0f}",
            f"{raw['cpu_share']['clients']:.0%}",
            f"{raw['clients_cpu_us_per_round_trip']:.0f}",
        )
    console.print(cpu)
    console.print(
        "[dim]referee (with grpc's threads) and the four bots during the refereed window; raw "
        "server and its client processes during the raw window.[/]"
    )
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        console.print(
            f"[dim]  {level['concurrency']:>3} matches: "
            f"{ref['messages_to_bots_per_decision']:.2f} messages to bots per decision "
            f"({100 * ref['bundled_share']:.0f} % of what they carry in bundles), "
            f"{ref['rotations_per_s']:,.0f} rotations/s, {ref['matches_ended_in_window']} "
            f"ended in the window, mean running {ref['mean_running_matches']:.1f}; "
            f"CPU per decision, referee + bots {level['cpu_per_decision_us']:,.0f} µs vs raw "
            f"server + clients {level['cpu_per_round_trip_us']:,.0f} µs per round trip "
            f"(ratio {level['cpu_ratio']:.2f}); other processes busy "
            f"{ref['other_load_cores']:.2f}/{raw['other_load_cores']:.2f} cores "
            "(refereed/raw window)[/]"
        )
        if ref["problems"] or ref["create_match_failures"]:
            console.print(
                f"[yellow]  {level['concurrency']:>3}: problems {ref['problems']}, "
                f"CreateMatch failures {ref['create_match_failures']} "
                f"({ref['create_match_last_error']})[/]"
            )
    busiest = max(
        max(lv["refereed"]["other_load_cores"], lv["raw"]["other_load_cores"])
        for lv in data["levels"]
    )
    if busiest > 0.25:
        warn_busy_machine(
            console,
            f"processes outside this benchmark kept up to {busiest:.2f} "
            f"of {data['cpu_count']} cores busy during the measurements",
            "absolute rates are pessimistic and noisy, the ratios (raw and "
            "refereed measured back to back) hold better",
        )
    head = data["headline"]
    console.print(
        f"headline: refereed/raw at {HEADLINE_CONCURRENCY} concurrent matches = "
        f"{head['ratio']:.2f} (goal >= {RATIO_GOAL}): {verdict(head['pass'])}"
    )
    if not head["pass"]:
        console.print("[dim]run with --profile to see where the referee process spends its time[/]")
    console.print(f"[dim]total benchmark time {data['elapsed_s']:.1f} s[/]")


def report_profile(console: Console, data: JSON) -> None:
    prof = data["profile"]
    table = Table(
        title=f"Referee under cProfile, {HEADLINE_CONCURRENCY} concurrent matches: "
        "top functions by own time"
    )
    for col, justify in (
        ("function", "left"),
        ("calls", "right"),
        ("own s", "right"),
        ("own %", "right"),
        ("own µs/dec", "right"),
        ("cum µs/dec", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in prof["top_self"]:
        table.add_row(
            row["function"],
            f"{row['ncalls']:,}",
            f"{row['tottime_s']:.3f}",
            f"{row['tottime_share']:.1%}",
            f"{row['tottime_us_per_decision']:.1f}",
            f"{row['cumtime_us_per_decision']:.1f}",
        )
    console.print(table)
    cum = Table(title="scout_arena functions by cumulative time")
    for col, justify in (
        ("function", "left"),
        ("calls", "right"),
        ("cum µs/dec", "right"),
        ("own µs/dec", "right"),
    ):
        cum.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in prof["top_cumulative_scout_arena"]:
        cum.add_row(
            row["function"],
            f"{row['ncalls']:,}",
            f"{row['cumtime_us_per_decision']:.1f}",
            f"{row['tottime_us_per_decision']:.1f}",
        )
    console.print(cum)
    ref = data["refereed"]
    console.print(
        f"[dim]profiled window: {ref['decisions']:,} decisions, {ref['decisions_per_s']:,.0f}/s "
        f"under cProfile (slower than unprofiled), {prof['total_profiled_s']:.2f} s of "
        f"profiled main-thread time = {prof['total_profiled_s'] / ref['decisions'] * 1e6:.0f} "
        "µs per decision; grpc's C-core threads are not seen by cProfile[/]"
    )
