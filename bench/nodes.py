"""Nodes benchmark: the ladder playing every match on 1, 2 and 4 local referee nodes, and 10,000
bots connected to a ladder with 2 nodes.

Run as ``.venv/bin/python bench/nodes.py --json bench/results/nodes.json`` (tiny:
``--nodes-list 1,2 --bots 8 --seconds 10 --seat-bots 200``).

Part A, throughput (``--nodes-list 1,2,4``): for each node count a fresh ladder
(``scout-arena ladder serve --nodes N``, SQLite in a temporary folder, ``--bots`` bots registered
through the repository, one owner each, tables of ``--table-sizes``), and ``--bots`` prompt bots
(the SDK's random bot with ``async`` methods, so it answers at once on the event loop) run by
``scout_client.run_bot`` in ``--bot-procs`` client processes (this script in a child mode), each
bot with ``--concurrency`` matches at once. Once every bot is connected and a first match has
finished (plus ``--warmup`` seconds), the window of ``--seconds`` is measured:

* matches/min and decisions/s, from the matches the ladder database says finished in the window
  (by ``finished_at``) and their records (decisions: every action of every round plus every
  rotation choice); a match that straddles an edge counts whole where it finished;
* CPU seconds of the ladder, of each node (children of the ladder, found in /proc) and of the
  bot clients over the window (utime + stime from /proc/PID/stat), as shares of one core, and
  each node's share of the matches (``meta.node`` of the records);
* each node's capacity is ``--capacity`` (default 100, the ladder's own default). The ladder
  places a table on the least loaded node, the table's bots' last node only breaking ties
  (nodes.py ``NodeRegistry.place``), so every node plays from the first match whatever the
  capacity: the table's "matches per node" row shows the split;
* decisions/s per node-core: decisions/s / min(nodes, cores) -- on a machine with more cores
  than nodes (and spare cores for the bots and the ladder) it should stay nearly flat as the
  nodes grow; on a small machine the bots, the ladder and the nodes share the same cores and
  it falls.

Part B, seating (``--seat-bots`` 10,000, ``--seat-nodes`` 2; ``--no-seat`` skips it): a ladder
with 2 local nodes, the bots registered in bulk (straight into the ladder's tables), and every
bot an SDK ``run_bot`` on a connection of its own: the SDK opens its channels in
``scout_client.connection.open_channel``, whose options come from ``channel_options``, which the
client processes extend with ``("grpc.use_local_subchannel_pool", 1)`` (otherwise equal
channels of one process share one TCP connection); its node channels (after an assignment) come
from the same function. The bots here think ``--seat-think-ms`` per decision (the ladder's
decision time is raised to match) so the matches they play keep the machine from saturating
while the rest are being seated. Every node may hold enough matches to seat every bot at once
(``--seat-capacity``, tables of 4). Reported: the time from the first client process starting
to the last bot's Welcome from the ladder, to the last bot's first MatchStart (on its node, after
following the assignment), and the RSS (VmRSS, VmHWM from /proc) of the ladder and of each node
before the bots, once all are connected, once all are seated, and the peak.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from common import JSON, free_port, proc_status_kb, write_json
from nodes_clients import client_main
from nodes_report import SEAT_TABLE, report_configs, report_seating
from procs import (
    Child,
    CpuSnapshot,
    cpu_shares,
    environment,
    other_load_cores,
    process_cpu_s,
    raise_nofile,
    socket_count,
    spawn,
)
from rich.console import Console

THIS_SCRIPT = Path(__file__).resolve()
PYTHON = sys.executable
ADMIN_TOKEN = "nodes-bench-admin"
SEAT_BOTS_PER_PROCESS = 1250
DEFAULT_CAPACITY = 100


# ----- the driver: helpers ------------------------------------------------------------------------


def register(url: str, count: int, prefix: str) -> list[tuple[str, str]]:
    """``count`` bots, one owner each, through `Repository.register_bot`."""
    from scout_ladder.repository import Repository

    repo = Repository(url)
    repo.migrate()
    tokens = [(bot.name, token) for bot, token in
              (repo.register_bot(f"{prefix}{i:05d}", f"owner-{prefix}{i:05d}")
               for i in range(count))]
    repo.close()
    return tokens


def register_bulk(url: str, count: int, prefix: str) -> list[tuple[str, str]]:
    """``count`` bots written straight into the ladder's tables in one transaction (as
    `register_bot` would leave them): one by one they would take ~4 ms each on SQLite."""
    import secrets

    from scout_ladder.models import Bot, BotVersion
    from scout_ladder.repository import Repository
    from scout_ladder.repository.bots import hash_token
    from sqlalchemy import create_engine, insert, select

    repo = Repository(url)
    repo.migrate()
    repo.close()
    now = datetime.now(UTC)
    tokens = [(f"{prefix}{i:05d}", secrets.token_urlsafe(32)) for i in range(count)]
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(insert(Bot), [
            {"name": name, "owner": f"owner-{name}", "version": 1,
             "token_hash": hash_token(token), "retired": False, "created_at": now}
            for name, token in tokens])
        ids = connection.execute(select(Bot.id)).scalars().all()
        connection.execute(insert(BotVersion), [
            {"bot_id": bot_id, "version": 1, "registered_at": now} for bot_id in ids])
    engine.dispose()
    return tokens


def node_pids(ladder_pid: int) -> dict[str, int]:
    """The ladder's node children: node name (``--node-name``) -> pid."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[1]) != ladder_pid:
                continue
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if "--node-name" in argv:
            out[argv[argv.index("--node-name") + 1]] = int(entry)
    return dict(sorted(out.items()))


async def start_ladder(work: Path, url: str, nodes: int, table_sizes: str,
                       extra: Sequence[str] = ()) -> tuple[Child, dict[str, int], str]:
    port = free_port()
    ladder = await spawn("ladder", [
        PYTHON, "-m", "scout_arena.cli", "ladder", "serve", "--database", url,
        "--port", str(port), "--admin-token", ADMIN_TOKEN, "--table-sizes", table_sizes,
        "--nodes", str(nodes), "--node-records", str(work / "node-records"), *extra], work)
    pids: dict[str, int] = {}
    try:
        await ladder.expect("ladder listening on ", timeout=120)
        await ladder.expect(f"{nodes} local referee nodes on ", timeout=120)
        pids = node_pids(ladder.pid)
        if len(pids) != nodes:
            raise RuntimeError(f"found {len(pids)} node processes of the ladder, not {nodes}")
    except BaseException:
        await stop_all(ladder, pids or node_pids(ladder.pid), [])
        raise
    return ladder, pids, f"127.0.0.1:{port}"


async def start_clients(work: Path, address: str, tokens_file: Path, bots: int, procs: int,
                        concurrency: int, think_ms: int, connect_timeout: float) -> list[Child]:
    clients = []
    first = 0
    for i in range(procs):
        count = bots // procs + (1 if i < bots % procs else 0)
        clients.append(await spawn(f"{work.name}-client-{i}", [
            PYTHON, str(THIS_SCRIPT), "--client", address, "--tokens", str(tokens_file),
            "--first", str(first), "--count", str(count), "--concurrency", str(concurrency),
            "--think-ms", str(think_ms), "--connect-timeout", str(connect_timeout)], work))
        first += count
    return clients


async def stop_all(ladder: Child, nodes: dict[str, int], clients: list[Child]) -> JSON:
    """SIGTERM the ladder (it stops its nodes first), then the clients; what would not stop
    in time is killed (the nodes by the pids found at the start)."""
    started = time.monotonic()
    if ladder.process.returncode is None:
        ladder.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(ladder.process.wait(), 90)
        except TimeoutError:
            ladder.process.kill()
            await ladder.process.wait()
            for pid in nodes.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    stop_s = time.monotonic() - started
    await asyncio.gather(*(c.stop("quit", timeout=30) for c in clients))
    if ladder.pump is not None:
        ladder.pump.cancel()
    return {"ladder_stop_s": stop_s, "ladder_exit": ladder.process.returncode}


def rss(pid: int) -> JSON:
    status = proc_status_kb(pid)
    return {"rss_mb": status.get("VmRSS", 0) / 1024, "hwm_mb": status.get("VmHWM", 0) / 1024}


def log_errors(work: Path) -> list[str]:
    bad = []
    for path in sorted(work.rglob("*.log")):
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                if any(w in line for w in ("Traceback", "ERROR", "Exception")):
                    bad.append(f"{path.name}: {line.strip()[:200]}")
    return bad


# ----- part A: throughput by node count -----------------------------------------------------------


async def run_config(args: argparse.Namespace, console: Console, root: Path, nodes: int) -> JSON:
    from scout_ladder.repository import Repository

    work = root / f"nodes-{nodes}"
    work.mkdir(exist_ok=True)
    url = f"sqlite:///{work / 'ladder.db'}"
    tokens = await asyncio.to_thread(register, url, args.bots, "b")
    tokens_file = work / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    capacity = args.capacity
    ladder, pids, address = await start_ladder(work, url, nodes, args.table_sizes,
                                               ["--node-capacity", str(capacity)])
    procs = max(1, min(args.bot_procs, args.bots))
    clients: list[Child] = []
    repo = Repository(url)
    result: JSON = {"nodes": nodes, "node_cores": min(nodes, os.cpu_count() or 1),
                    "node_capacity": capacity,
                    "bots": args.bots, "bot_procs": procs, "node_pids": pids}
    try:
        clients = await start_clients(work, address, tokens_file, args.bots, procs,
                                      args.concurrency, 0, 120)
        ready = [json.loads((await c.expect("R ", timeout=180))[2:]) for c in clients]
        result["connected"] = sum(r["connected"] for r in ready)
        deadline = time.monotonic() + 120
        while not await asyncio.to_thread(repo.list_matches, limit=1, status="finished"):
            if time.monotonic() > deadline:
                raise RuntimeError("no match finished within 120 s of the bots connecting")
            await asyncio.sleep(0.5)
        await asyncio.sleep(args.warmup)
        watched = {"ladder": ladder.pid, **pids,
                   **{f"client-{i}": c.pid for i, c in enumerate(clients)}}
        wall0, a = datetime.now(UTC), CpuSnapshot.take(watched)
        await asyncio.sleep(args.seconds)
        wall1, b = datetime.now(UTC), CpuSnapshot.take(watched)
        window = b.at - a.at
        shares = cpu_shares(a, b)
        restarted = {n: p for n, p in node_pids(ladder.pid).items() if pids.get(n) != p}
        result["rss"] = {"ladder": rss(ladder.pid), **{n: rss(p) for n, p in pids.items()}}
    finally:
        result.update(await stop_all(ladder, pids, clients))
    summaries = await asyncio.to_thread(repo.list_matches, limit=10_000_000)
    in_window = [m for m in summaries if m.finished_at is not None
                 and wall0 <= m.finished_at < wall1]
    finished = [m for m in in_window if m.status == "finished"]
    by_node: Counter[str] = Counter()
    decisions_by_node: Counter[str] = Counter()
    for m in finished:
        text = await asyncio.to_thread(repo.get_record, m.match_id)
        record = json.loads(text or "{}")
        node = str(record.get("meta", {}).get("node", "?"))
        by_node[node] += 1
        decisions_by_node[node] += sum(len(r.get("actions", [])) + len(r.get("rotations", []))
                                       for r in record.get("rounds", []))
    repo.close()
    decisions = sum(decisions_by_node.values())
    node_cpu = {n: shares[n] for n in pids}
    result.update({
        "window_s": window,
        "matches_finished": len(finished),
        "matches_other_status": dict(Counter(m.status for m in in_window
                                             if m.status != "finished")),
        "matches_per_min": len(finished) / window * 60,
        "decisions": decisions,
        "decisions_per_s": decisions / window,
        "decisions_per_s_per_node_core": decisions / window / result["node_cores"],
        "matches_by_node": dict(sorted(by_node.items())),
        "decisions_by_node": dict(sorted(decisions_by_node.items())),
        "cpu_cores": {"ladder": shares["ladder"], "nodes": node_cpu,
                      "nodes_total": sum(node_cpu.values()),
                      "clients": sum(v for k, v in shares.items() if k.startswith("client-")),
                      "machine_busy": shares["machine_busy_cores"],
                      "other_load": other_load_cores(shares)},
        "nodes_restarted": restarted,
        "log_errors": log_errors(work),
    })
    console.print(f"[dim]{nodes} node(s): {len(finished)} matches, {decisions:,} decisions in "
                  f"{window:.1f} s[/]")
    return result


# ----- part B: seating thousands of bots ----------------------------------------------------------


async def run_seating(args: argparse.Namespace, console: Console, root: Path) -> JSON:
    work = root / "seat"
    work.mkdir(exist_ok=True)
    url = f"sqlite:///{work / 'ladder.db'}"
    started = time.monotonic()
    tokens = await asyncio.to_thread(register_bulk, url, args.seat_bots, "s")
    register_s = time.monotonic() - started
    tokens_file = work / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    capacity = args.seat_capacity or math.ceil(args.seat_bots / SEAT_TABLE / args.seat_nodes) + 16
    decision_ms = max(1000, args.seat_think_ms + 2000)
    ladder, pids, address = await start_ladder(work, url, args.seat_nodes, str(SEAT_TABLE), [
        "--node-capacity", str(capacity), "--decision-ms", str(decision_ms)])
    procs = args.seat_procs or max(1, min(8, math.ceil(args.seat_bots / SEAT_BOTS_PER_PROCESS)))
    watched = {"ladder": ladder.pid, **pids}
    result: JSON = {"bots": args.seat_bots, "nodes": args.seat_nodes, "client_procs": procs,
                    "node_capacity": capacity, "think_ms": args.seat_think_ms,
                    "decision_ms": decision_ms, "register_bulk_s": register_s,
                    "rss": {"before_bots": {k: rss(p) for k, p in watched.items()}}}
    console.print(f"[dim]seating: {args.seat_bots:,} bots registered in {register_s:.1f} s; "
                  f"connecting them from {procs} processes[/]")
    peak: dict[str, float] = dict.fromkeys(watched, 0.0)

    async def sample() -> None:
        while True:
            for key, pid in watched.items():
                peak[key] = max(peak[key], proc_status_kb(pid).get("VmRSS", 0) / 1024)
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    clients: list[Child] = []
    cpu0 = {k: process_cpu_s(p) for k, p in watched.items()}
    try:
        t0 = time.monotonic()
        clients = await start_clients(work, address, tokens_file, args.seat_bots, procs, 1,
                                      args.seat_think_ms, args.seat_timeout)
        ready = [json.loads((await c.expect("R ", timeout=args.seat_timeout))[2:])
                 for c in clients]
        connected_at = time.monotonic()
        result["rss"]["all_connected"] = {k: rss(p) for k, p in watched.items()}
        result["ladder_sockets_connected"] = socket_count(ladder.pid)
        failed: Counter[str] = Counter()
        for r in ready:
            failed.update(r["failed"])
        result["connect"] = {"connected": sum(r["connected"] for r in ready),
                             "failed": dict(failed),
                             "all_s": max((r["last_at"] or t0 for r in ready), default=t0) - t0,
                             "noticed_s": connected_at - t0}
        console.print(f"[dim]{result['connect']['connected']:,} bots connected in "
                      f"{result['connect']['all_s']:.1f} s; waiting for every seat[/]")
        remaining = max(1.0, args.seat_timeout - (time.monotonic() - t0))
        try:
            async with asyncio.timeout(remaining):
                for c in clients:
                    await c.expect("M ", timeout=remaining)
            result["all_seated"] = True
        except TimeoutError:
            result["all_seated"] = False
        result["rss"]["all_seated"] = {k: rss(p) for k, p in watched.items()}
        result["ladder_sockets_seated"] = socket_count(ladder.pid)
        result["node_sockets_seated"] = {n: socket_count(p) for n, p in pids.items()}
        per = await asyncio.gather(*(c.stats(0, 0) for c in clients))
        welcomed = sorted(x - t0 for s in per for x in s["welcomed_at"])
        seated = sorted(x - t0 for s in per for x in s["seated_at"])
        result["seat"] = {
            "seated": len(seated), "all_s": seated[-1] if seated else None,
            "p50_s": seated[len(seated) // 2] if seated else None,
            "first_s": seated[0] if seated else None,
            "after_all_connected_s": (seated[-1] - welcomed[-1]) if seated and welcomed else None}
        result["connect"]["p50_s"] = welcomed[len(welcomed) // 2] if welcomed else None
        result["clients_rss_mb"] = sum(s["rss_kb"] for s in per) / 1024
        result["cpu_s"] = {k: process_cpu_s(p) - cpu0[k] for k, p in watched.items()}
        result["phase_s"] = time.monotonic() - t0
        result["rss"]["peak_sampled"] = peak
        result["rss"]["vmhwm"] = {k: rss(p)["hwm_mb"] for k, p in watched.items()}
    finally:
        sampler.cancel()
        result.update(await stop_all(ladder, pids, clients))
    result["log_errors"] = log_errors(work)
    return result


# ----- main ---------------------------------------------------------------------------------------


async def run_all(args: argparse.Namespace, console: Console, root: Path) -> JSON:
    raise_nofile()
    started = time.monotonic()
    data: JSON = {"benchmark": "scout-arena nodes", **environment(),
                  "setup": {k: v for k, v in vars(args).items()
                            if k not in ("client", "tokens", "first", "count")},
                  "configs": []}
    for nodes in args.nodes_list:
        data["configs"].append(await run_config(args, console, root, nodes))
    if not args.no_seat:
        data["seating"] = await run_seating(args, console, root)
    data["elapsed_s"] = time.monotonic() - started
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes-list", default="1,2,4",
                        type=lambda s: [int(x) for x in s.split(",") if x],
                        help="node counts to measure side by side (default 1,2,4)")
    parser.add_argument("--bots", type=int, default=40, help="prompt bots in part A")
    parser.add_argument("--bot-procs", type=int, default=4, help="SDK processes in part A")
    parser.add_argument("--concurrency", type=int, default=2,
                        help="matches at once per bot in part A")
    parser.add_argument("--table-sizes", default="2,3,4", help="part A's table sizes")
    parser.add_argument("--seconds", type=float, default=60.0, help="window per configuration")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="seconds after the first finished match before the window")
    parser.add_argument("--seat-bots", type=int, default=10_000, help="bots in part B")
    parser.add_argument("--seat-nodes", type=int, default=2, help="nodes in part B")
    parser.add_argument("--seat-procs", type=int, default=0,
                        help=f"SDK processes in part B (0: one per {SEAT_BOTS_PER_PROCESS} "
                             "bots, at most 8)")
    parser.add_argument("--seat-think-ms", type=int, default=2000,
                        help="part B bots' time per decision")
    parser.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY,
                        help="part A matches per node (default: the ladder's, 100)")
    parser.add_argument("--seat-capacity", type=int, default=0,
                        help="part B matches per node (0: enough to seat every bot at once)")
    parser.add_argument("--seat-timeout", type=float, default=420.0,
                        help="part B: give up waiting for connections / seats after this")
    parser.add_argument("--no-seat", action="store_true", help="skip part B")
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    parser.add_argument("--keep", metavar="DIR", help="keep databases, records and logs in DIR")
    # Child-process mode.
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--think-ms", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--connect-timeout", type=float, default=120.0, help=argparse.SUPPRESS)
    parser.add_argument("--connect-concurrency", type=int, default=64, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        return client_main(args)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    with contextlib.ExitStack() as stack:
        if args.keep:
            root = Path(args.keep)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-nodes-")))
        data = asyncio.run(run_all(args, console, root))
    report_configs(console, data["configs"])
    if "seating" in data:
        report_seating(console, data["seating"])
    console.print(f"[dim]total time {data['elapsed_s']:.1f} s[/]")
    if args.json:
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
