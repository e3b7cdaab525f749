"""The tables bench/nodes.py prints: throughput by node count, and the seating of
thousands of bots."""

from __future__ import annotations

import json
import os
from typing import Any

from common import JSON, warn_busy_machine
from rich.console import Console
from rich.table import Table

SEAT_TABLE = 4
"""Part B seats the bots at tables of this size (bench/nodes.py), which its table names."""


# ----- report -------------------------------------------------------------------------------------


def _ratio(value: float, base: float) -> str:
    return f" ({value / base:.2f}x)" if base else ""


def report_configs(console: Console, configs: list[JSON]) -> None:
    if not configs:
        return
    base = configs[0]
    first = configs[0]
    table = Table(
        title="Ladder matches on local referee nodes",
        caption=f"{first['bots']} prompt random bots ({first['bot_procs']} SDK "
        f"processes), {first['window_s']:.0f} s window each, "
        f"{os.cpu_count()} cores; ratios vs {base['nodes']} node(s)",
    )
    table.add_column("figure")
    for c in configs:
        table.add_column(f"{c['nodes']} node{'s' if c['nodes'] > 1 else ''}", justify="right")

    def row(name: str, cell: Any) -> None:
        table.add_row(name, *(cell(c) for c in configs))

    row("matches finished in window", lambda c: f"{c['matches_finished']:,}")
    row(
        "matches/min",
        lambda c: (
            f"{c['matches_per_min']:,.0f}" + _ratio(c["matches_per_min"], base["matches_per_min"])
        ),
    )
    row(
        "decisions/s",
        lambda c: (
            f"{c['decisions_per_s']:,.0f}" + _ratio(c["decisions_per_s"], base["decisions_per_s"])
        ),
    )
    row("node-cores (min(nodes, cores))", lambda c: str(c["node_cores"]))
    row("capacity per node (matches)", lambda c: str(c["node_capacity"]))
    row(
        "decisions/s per node-core",
        lambda c: (
            f"{c['decisions_per_s_per_node_core']:,.0f}"
            + _ratio(c["decisions_per_s_per_node_core"], base["decisions_per_s_per_node_core"])
        ),
    )
    row("ladder CPU (cores)", lambda c: f"{c['cpu_cores']['ladder']:.2f}")
    row("nodes CPU, total (cores)", lambda c: f"{c['cpu_cores']['nodes_total']:.2f}")
    row(
        "CPU per node (cores)",
        lambda c: " ".join(f"{v:.2f}" for v in c["cpu_cores"]["nodes"].values()),
    )
    row(
        "CPU share per node",
        lambda c: " ".join(
            f"{v / max(1e-9, c['cpu_cores']['nodes_total']):.0%}"
            for v in c["cpu_cores"]["nodes"].values()
        ),
    )
    row("matches per node", lambda c: " ".join(str(v) for v in c["matches_by_node"].values()))
    row("bot clients CPU (cores)", lambda c: f"{c['cpu_cores']['clients']:.2f}")
    row(
        "machine busy / other load (cores)",
        lambda c: f"{c['cpu_cores']['machine_busy']:.2f} / {c['cpu_cores']['other_load']:.2f}",
    )
    row("other matches ending in window", lambda c: json.dumps(c["matches_other_status"]))
    row(
        "node RSS (MB)",
        lambda c: " ".join(f"{v['rss_mb']:.0f}" for k, v in c["rss"].items() if k != "ladder"),
    )
    row(
        "nodes restarted / log error lines",
        lambda c: f"{len(c['nodes_restarted'])} / {len(c['log_errors'])}",
    )
    console.print(table)
    cores = os.cpu_count() or 1
    if any(c["cpu_cores"]["machine_busy"] >= 0.9 * cores for c in configs):
        console.print(
            f"[yellow]note: all {cores} cores were busy (ladder + bot clients + "
            "nodes) in at least one configuration: the nodes could not get more CPU, "
            "so adding nodes cannot raise the rate on this machine[/]"
        )
    for c in configs:
        if c["cpu_cores"]["other_load"] > 0.5:
            warn_busy_machine(
                console,
                f"{c['cpu_cores']['other_load']:.1f} cores were busy "
                f"outside the measured processes during the {c['nodes']}-node "
                "run",
                "its rates are low by an unknown amount",
            )
        for line in c["log_errors"][:5]:
            console.print(f"[yellow]{c['nodes']} node(s): {line}[/]")


def report_seating(console: Console, data: JSON) -> None:
    table = Table(
        title=f"Seating {data['bots']:,} bots (one connection each, "
        f"{data['client_procs']} SDK processes) on a ladder with "
        f"{data['nodes']} local nodes (tables of {SEAT_TABLE}, capacity "
        f"{data['node_capacity']} per node, bots think {data['think_ms']} ms)"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    connect, seat = data.get("connect", {}), data.get("seat", {})

    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    rows = [("registering (bulk insert)", s(data["register_bulk_s"]))]
    if connect:
        rows += [
            (
                "bots connected / failed",
                f"{connect['connected']:,} / {json.dumps(connect['failed'])}",
            ),
            (
                "all connected (last Welcome) / p50",
                f"{s(connect['all_s'])} / {s(connect.get('p50_s'))}",
            ),
            (
                "ladder sockets, all connected / all seated",
                f"{data['ladder_sockets_connected']:,} / {data.get('ladder_sockets_seated', 0):,}",
            ),
        ]
    if seat:
        rows += [
            (
                "bots seated (first MatchStart on a node)",
                f"{seat['seated']:,}" + ("" if data["all_seated"] else " (timed out)"),
            ),
            (
                "all seated / p50 / first",
                f"{s(seat['all_s'])} / {s(seat['p50_s'])} / {s(seat['first_s'])}",
            ),
            ("last seat after last connect", s(seat["after_all_connected_s"])),
        ]
    sizes = data["rss"]
    for key in sizes["before_bots"]:
        before = sizes["before_bots"][key]["rss_mb"]
        connected = sizes.get("all_connected", {}).get(key, {}).get("rss_mb")
        seated = sizes.get("all_seated", {}).get(key, {}).get("rss_mb")
        hwm = sizes.get("vmhwm", {}).get(key)
        sockets = data.get("node_sockets_seated", {}).get(key)
        if key == "ladder" and connected is not None and data["bots"]:
            per_bot = f", {(connected - before) * 1024 / data['bots']:.1f} kB/bot connected"
        elif sockets and seated is not None:
            per_bot = f", {(seated - before) * 1024 / sockets:.1f} kB/socket seated"
        else:
            per_bot = ""
        rows.append(
            (
                f"{key} RSS: before / connected / seated / VmHWM (MB)",
                " / ".join(
                    "-" if v is None else f"{v:.0f}" for v in (before, connected, seated, hwm)
                )
                + per_bot,
            )
        )
    if "cpu_s" in data:
        rows.append(
            ("CPU seconds in the phase", " ".join(f"{k} {v:.1f}" for k, v in data["cpu_s"].items()))
        )
        rows.append(
            (
                "client processes RSS, total",
                f"{data['clients_rss_mb']:.0f} MB "
                f"({data['clients_rss_mb'] * 1024 / max(1, data['bots']):.0f} kB/bot)",
            )
        )
    rows += [
        ("ladder stop (SIGTERM) / exit", f"{data['ladder_stop_s']:.1f} s / {data['ladder_exit']}"),
        ("log error lines", str(len(data["log_errors"]))),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    for line in data["log_errors"][:5]:
        console.print(f"[yellow]seating: {line}[/]")
