"""The raw baseline of bench/referee.py: a grpc.aio ping-pong server and its clients
(child-process modes), the typical DecisionRequest they exchange, and the phase that
measures them."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import grpc
from procs import Child, CpuSnapshot, cpu_shares, latency_summary, other_load_cores, percentile
from referee_setup import DECISION_MS, NUM_BOTS, RAW_METHOD, SAMPLE_MATCH_ID, TIME_BANK_MS
from rich.console import Console
from scout.v1 import arena_pb2, game_pb2
from scout_arena.server import convert
from scout_rules import Phase, State
from trivial_bot import (
    EOF,
    JSON,
    Recorder,
    serve_commands,
    settle_collector,
)

# ----- a typical DecisionRequest --------------------------------------------------------------


def typical_decision_request(matches: int = 6) -> tuple[arena_pb2.RefereeMessage, JSON]:
    """Every DecisionRequest of a few seeded 4-player matches played the trivial bots' way
    (first legal Show, else first legal Scout); returns the one closest to the mean size."""
    samples: list[arena_pb2.RefereeMessage] = []
    for seed in range(1, matches + 1):
        state = State.new(NUM_BOTS, seed)
        request_id = 0
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                for seat in range(NUM_BOTS):
                    state.choose_rotation(seat, False)
                continue
            actor = state.current_seat
            assert actor is not None
            request_id += 1
            samples.append(
                convert.decision_request(
                    state.observation(actor), SAMPLE_MATCH_ID, request_id, DECISION_MS, TIME_BANK_MS
                )
            )
            shows = state.legal_shows()
            state.apply(shows[0] if shows else state.legal_scouts()[0])
    sizes = [m.ByteSize() for m in samples]
    mean = statistics.fmean(sizes)
    chosen = min(samples, key=lambda m: abs(m.ByteSize() - mean))
    ordered = sorted(sizes)
    info = {
        "sampled_requests": len(sizes),
        "sample_matches": matches,
        "decisions_per_match": len(sizes) / matches,
        "mean_bytes": mean,
        "median_bytes": percentile(ordered, 0.5),
        "p90_bytes": percentile(ordered, 0.9),
        "max_bytes": ordered[-1],
        "payload_bytes": chosen.ByteSize(),
    }
    return chosen, info


def raw_reply() -> arena_pb2.BotMessage:
    """The raw server's reply: an ActionChoice as the trivial bots send it (~30 bytes)."""
    return arena_pb2.BotMessage(
        action=arena_pb2.ActionChoice(
            match_id=SAMPLE_MATCH_ID,
            request_id=123_456,
            action=game_pb2.Action(show=game_pb2.Show(start=3, length=1)),
        )
    )


# ----- the raw server and client (child process modes) --------------------------------------


async def raw_server_main() -> int:
    from scout_arena.server.listener import SERVER_OPTIONS

    reply = raw_reply()

    async def play(request_iterator: Any, context: Any) -> None:
        while True:
            message = await context.read()
            if message is EOF:
                return
            await context.write(reply)

    handler = grpc.method_handlers_generic_handler(
        "bench.PingPong",
        {
            "Play": grpc.stream_stream_rpc_method_handler(
                cast(Any, play),
                request_deserializer=arena_pb2.RefereeMessage.FromString,
                response_serializer=arena_pb2.BotMessage.SerializeToString,
            ),
        },
    )
    server = grpc.aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"raw server listening on 127.0.0.1:{port}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # until stdin closes
    await server.stop(grace=0.5)
    return 0


async def raw_client_main(address: str, payload_path: Path) -> int:
    """A ping-pong client process: ``streams N`` (re)opens N streams on its one channel, each
    writing the payload and waiting for the reply in a loop; prints ``R`` when they run."""
    request = arena_pb2.RefereeMessage.FromString(payload_path.read_bytes())
    recorder = Recorder()
    tasks: list[asyncio.Task[None]] = []

    async with grpc.aio.insecure_channel(address) as channel:
        method = channel.stream_stream(
            RAW_METHOD,
            request_serializer=arena_pb2.RefereeMessage.SerializeToString,
            response_deserializer=arena_pb2.BotMessage.FromString,
        )

        async def ping_pong(call: Any, started: asyncio.Event) -> None:
            monotonic = time.monotonic
            add = recorder.add
            await call.write(request)  # one untimed round trip first
            await call.read()
            started.set()
            try:
                while True:
                    t0 = monotonic()
                    await call.write(request)
                    reply = await call.read()
                    if reply is EOF:
                        return
                    now = monotonic()
                    add(now, now - t0)
            finally:
                call.cancel()

        async def streams(words: list[str]) -> None:
            if words[0] != "streams":
                return
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks.clear()
            events = [asyncio.Event() for _ in range(int(words[1]))]
            tasks.extend(asyncio.create_task(ping_pong(method(None), e)) for e in events)
            for event in events:
                await event.wait()
            settle_collector()
            sys.stdout.write("R\n")
            sys.stdout.flush()

        def stats(t0: float, t1: float) -> JSON:
            count, latencies = recorder.window(t0, t1)
            return {"round_trips": count, "latencies_us": latencies}

        await serve_commands(stats, streams)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return 0


# ----- raw ping-pong phase ----------------------------------------------------------------


async def raw_phase(
    console: Console,
    concurrency: int,
    warmup: float,
    measure: float,
    server: Child,
    clients: Sequence[Child],
) -> JSON:
    """``concurrency`` ping-pong streams split over the (already running) client processes."""
    phase_start = time.monotonic()
    used = min(concurrency, len(clients))
    split = [
        concurrency // used + (1 if i < concurrency % used else 0) if i < used else 0
        for i in range(len(clients))
    ]
    for client, streams in zip(clients, split, strict=True):
        await client.send(f"streams {streams}")
    for client in clients:
        await client.expect("R")
    setup_s = time.monotonic() - phase_start
    await asyncio.sleep(warmup)
    pids = {"server": server.pid, "driver": os.getpid(), **{c.name: c.pid for c in clients}}
    before = CpuSnapshot.take(pids)
    await asyncio.sleep(measure)
    after = CpuSnapshot.take(pids)
    per_client = await asyncio.gather(*(c.stats(before.at, after.at) for c in clients))
    teardown_start = time.monotonic()
    for client in clients:
        await client.send("streams 0")
    for client in clients:
        await client.expect("R")
    teardown_s = time.monotonic() - teardown_start
    wall = after.at - before.at
    trips = sum(s["round_trips"] for s in per_client)
    shares = cpu_shares(before, after)
    result: JSON = {
        "concurrency": concurrency,
        "client_processes": used,
        "window_s": wall,
        "round_trips": trips,
        "round_trips_per_s": trips / wall,
        "latency": latency_summary([x for s in per_client for x in s["latencies_us"]]),
        "cpu_share": {
            "server": shares["server"],
            "clients": sum(shares[c.name] for c in clients),
            "driver": shares["driver"],
            "machine_busy_cores": shares["machine_busy_cores"],
        },
        "server_cpu_us_per_round_trip": shares["server"] * wall / max(1, trips) * 1e6,
        "clients_cpu_us_per_round_trip": sum(shares[c.name] for c in clients)
        * wall
        / max(1, trips)
        * 1e6,
        "other_load_cores": other_load_cores(shares),
        "setup_s": setup_s,
        "teardown_s": teardown_s,
    }
    console.print(
        f"[dim]raw      {concurrency:>3} streams: "
        f"{result['round_trips_per_s']:,.0f} round trips/s (setup {setup_s:.1f} s, "
        f"teardown {teardown_s:.1f} s)[/]"
    )
    return result
