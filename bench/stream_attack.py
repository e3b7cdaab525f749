"""The referee's RSS through repeated bursts of stream-opening attacks: is the rise a cache to
bound, or memory the process keeps for the next burst?

A `referee serve` child takes ``--bursts`` bursts. Each opens ``--connections`` connections of
``--streams`` Play streams at once, a quarter of each kind: a wrong token (UNAUTHENTICATED), a
valid token past its stream cap (RESOURCE_EXHAUSTED), a valid token that never says Hello,
and bytes that are no BotMessage (INVALID_ARGUMENT); then every connection is dropped. The
child's VmRSS is read before the first burst and after each (once the referee is idle again).
Side by side, the same with glibc's malloc held to two arenas (``MALLOC_ARENA_MAX=2``): grpc's
threads each get an arena of their own, which keeps freed memory for reuse.

The reading: RSS that rises in the first burst and then stays flat through the next ones is
memory kept for reuse (allocator arenas, grpc's buffers), not a cache that grows with what it
saw; a cache would add about as much at every burst (distinct tokens and connections each
time). The table prints both, the JSON keeps every reading.

    .venv/bin/python bench/stream_attack.py --json bench/results/stream_attack.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from common import JSON, proc_status_kb, write_json
from rich.console import Console
from rich.table import Table
from scout.v1 import arena_pb2, arena_pb2_grpc

TOKEN = "bench-token-0"
KINDS = ("wrong token", "over the cap", "no hello", "garbage")


def start_referee(records: Path, env: dict[str, str],
                  traced: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """`referee serve`, or with ``traced`` this script's `child` (the same server under
    tracemalloc, writing the Python heap to ``traced`` at each SIGUSR1)."""
    command = [sys.executable, "-m", "scout_arena.cli", "referee", "serve", "--port", "0",
               "--admin-token", "adm", "--records", str(records), "--bot-token",
               f"b0={TOKEN}"] if traced is None else [sys.executable, __file__, "--child",
                                                      str(traced)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=env)
    assert process.stdout is not None
    found = re.search(r"listening on (\S+)", process.stdout.readline())
    if found is None:
        process.kill()
        raise RuntimeError("the referee did not start")
    return process, found.group(1)


async def one_stream(channel: Any, kind: str, index: int) -> str:
    """One attack stream; the outcome: its status, or "open" (the referee waits on it)."""
    stub: Any = arena_pb2_grpc.ArenaStub(channel)
    token = f"wrong-{index}-{time.monotonic_ns()}" if kind == "wrong token" else TOKEN
    metadata = (("authorization", f"Bearer {token}"),)
    call: Any = channel.stream_stream("/scout.v1.Arena/Play")(metadata=metadata) \
        if kind == "garbage" else stub.Play(metadata=metadata)
    try:
        if kind == "garbage":
            await call.write(b"\x0a\x05ab")
        elif kind != "no hello":
            await call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
                bot_name="b0", protocol_version=1, max_concurrent_matches=1)))
        await asyncio.wait_for(call.read(), 0.5)
        return "open"
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.INTERNAL and "from Core" in (exc.details() or ""):
            return "ended first"  # the client's own: it wrote after the referee ended the call
        return exc.code().name
    except TimeoutError:
        return "open"
    finally:
        call.cancel()


async def burst(address: str, connections: int, streams: int) -> dict[str, int]:
    channels = [grpc.aio.insecure_channel(address) for _ in range(connections)]
    outcomes: dict[str, int] = {}
    try:
        jobs = [one_stream(channel, KINDS[(c * streams + s) % len(KINDS)], c * streams + s)
                for c, channel in enumerate(channels) for s in range(streams)]
        for outcome in await asyncio.gather(*jobs, return_exceptions=True):
            name = outcome if isinstance(outcome, str) else type(outcome).__name__
            outcomes[name] = outcomes.get(name, 0) + 1
    finally:
        await asyncio.gather(*(channel.close(None) for channel in channels))
    return outcomes


def rss_mb(pid: int) -> float:
    return proc_status_kb(pid).get("VmRSS", 0) / 1024


async def child(out: Path) -> None:
    """A referee server under tracemalloc: at each SIGUSR1, a full collection, then one JSON
    line on ``out``: the Python heap (MB) and the five places it grew most since the start."""
    import gc
    import json
    import signal
    import tracemalloc

    from scout_arena.server import Referee, RefereeServer
    from scout_arena.server.convert import ProtobufWire

    tracemalloc.start(1)
    referee = Referee({"b0": TOKEN}, wire=ProtobufWire())
    server = RefereeServer(referee, port=0, admin_token="adm")
    await server.start()
    first = tracemalloc.take_snapshot()
    print(f"listening on {server.address}", flush=True)

    def dump() -> None:
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        growth = snapshot.compare_to(first, "lineno")[:5]
        line = {"python_mb": tracemalloc.get_traced_memory()[0] / 2**20,
                "grew": [f"{stat.size_diff / 1024:+.0f} kB {stat.traceback}" for stat in growth]}
        with out.open("a") as file:
            file.write(json.dumps(line) + "\n")

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)
    await asyncio.Event().wait()


async def python_heap(process: subprocess.Popen[str], traced: Path) -> JSON:
    """Ask the traced child for its Python heap; wait for its answer."""
    import json
    import signal

    count = len(traced.read_text().splitlines()) if traced.exists() else 0
    process.send_signal(signal.SIGUSR1)
    for _ in range(600):
        lines = traced.read_text().splitlines() if traced.exists() else []
        if len(lines) > count:
            return dict(json.loads(lines[-1]))
        await asyncio.sleep(0.05)
    raise RuntimeError("the traced referee did not answer")


async def run(label: str, env: dict[str, str], args: argparse.Namespace,
              console: Console, traced: bool = False) -> JSON:
    with tempfile.TemporaryDirectory() as tmp:
        heap_file = Path(tmp) / "heap.jsonl" if traced else None
        process, address = start_referee(Path(tmp), env, heap_file)
        heaps: list[JSON] = []
        try:
            await asyncio.sleep(args.settle)
            if heap_file is not None:
                heaps.append(await python_heap(process, heap_file))
            readings = [rss_mb(process.pid)]
            outcomes = []
            for number in range(args.bursts):
                outcomes.append(await burst(address, args.connections, args.streams))
                await asyncio.sleep(args.settle)
                if heap_file is not None:
                    heaps.append(await python_heap(process, heap_file))
                readings.append(rss_mb(process.pid))
                console.print(f"[dim]{label}: burst {number + 1}: RSS {readings[-1]:.1f} MB "
                              f"{outcomes[-1]}[/]")
        finally:
            process.terminate()
            process.wait(30)
    steps = [b - a for a, b in itertools.pairwise(readings)]
    return {"label": label, "rss_mb": readings, "steps_mb": steps, "outcomes": outcomes,
            "python_heap": heaps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--streams", type=int, default=8, help="Play streams per connection")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds of quiet before each reading")
    parser.add_argument("--json", metavar="FILE", help="write every reading here")
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(Path(args.child)))
        return
    console = Console()
    base = dict(os.environ)

    async def both() -> list[JSON]:
        return [await run("default malloc", base, args, console),
                await run("MALLOC_ARENA_MAX=2", {**base, "MALLOC_ARENA_MAX": "2"}, args,
                          console),
                await run("traced (tracemalloc)", base, args, console, traced=True)]

    runs = asyncio.run(both())
    table = Table(title=f"referee RSS (MB) through {args.bursts} bursts of "
                        f"{args.connections * args.streams} attack streams")
    table.add_column("reading")
    for result in runs:
        table.add_column(result["label"], justify="right")
    table.add_row("before", *(f"{r['rss_mb'][0]:.1f}" for r in runs))
    for index in range(args.bursts):
        table.add_row(f"after burst {index + 1}",
                      *(f"{r['rss_mb'][index + 1]:.1f} ({r['steps_mb'][index]:+.1f})"
                        for r in runs))
    table.add_row("first burst", *(f"{r['steps_mb'][0]:+.1f}" for r in runs))
    table.add_row("later bursts, mean", *(
        f"{sum(r['steps_mb'][1:]) / max(1, len(r['steps_mb']) - 1):+.2f}" for r in runs))
    traced = runs[-1]["python_heap"]
    table.add_row("traced: Python heap, before -> last",
                  "", "", f"{traced[0]['python_mb']:.1f} -> {traced[-1]['python_mb']:.1f}")
    console.print(table)
    console.print("Python heap growth since the start, after the last burst (tracemalloc):")
    for line in traced[-1]["grew"]:
        console.print(f"  {line}")
    if args.json:
        write_json(args.json, {"args": vars(args), "runs": runs}, console)


if __name__ == "__main__":
    main()
