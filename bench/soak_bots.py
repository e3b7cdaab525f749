"""The soak's client processes (a child mode of bench/soak.py): thousands of bots, each
with its own channel and Play stream, answering at once."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections import Counter
from typing import Any

import grpc
from common import proc_status_kb
from procs import raise_nofile
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2
from scout_arena.server.hardening import tune_gc
from trivial_bot import EOF, JSON, Recorder, TurnLog, serve_commands

CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),  # a TCP connection per channel, i.e. per bot
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]


def bot_name(index: int) -> str:
    return f"s{index:05d}"


def bot_token(index: int) -> str:
    return f"soak-token-{index:05d}"


# ----- the client processes (child mode) ----------------------------------------------------------


class SoakBot:
    """One bot: its own channel (TCP connection) and Play stream; answers at once."""

    def __init__(self, client: SoakClient, index: int) -> None:
        self.client = client
        self.name = bot_name(index)
        self.token = bot_token(index)
        self.seat = -1
        self.pending: dict[int, float] = {}

    async def run(self, address: str, gate: asyncio.Semaphore) -> None:
        client = self.client
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            stub = arena_pb2_grpc.ArenaStub(channel)
            first = True
            while not client.stopping:
                started = time.monotonic()
                try:
                    if first:
                        async with gate:
                            call = await self._open(stub)
                        client.connected(time.monotonic() - started)
                        first = False
                    else:
                        call = await self._open(stub)
                        client.reconnects += 1
                    await self._play(call)
                    code = await call.code()
                except grpc.aio.AioRpcError as exc:
                    code = exc.code()
                except (TimeoutError, ConnectionError) as exc:
                    client.problems[f"connect: {type(exc).__name__}"] += 1
                    code = None
                if client.stopping:
                    return
                client.stream_ends[code.name if code is not None else "none"] += 1
                if first:
                    client.failed += 1
                    client.check_ready()
                    return
                await asyncio.sleep(0.5)

    async def _open(self, stub: arena_pb2_grpc.ArenaAsyncStub) -> Any:
        call = stub.Play(
            None, metadata=(("authorization", f"Bearer {self.token}"),), wait_for_ready=True
        )
        await call.write(
            arena_pb2.BotMessage(
                hello=arena_pb2.Hello(
                    bot_name=self.name,
                    bot_version="bench-soak",
                    protocol_version=1,
                    max_concurrent_matches=1,
                    lean=self.client.lean,
                )
            )
        )
        welcome = await asyncio.wait_for(call.read(), 120)
        if (
            not isinstance(welcome, arena_pb2.RefereeMessage)
            or welcome.WhichOneof("body") != "welcome"
        ):
            raise ConnectionError(f"no Welcome: {welcome!r}")
        return call

    async def _play(self, call: Any) -> None:
        client = self.client
        received = client.received
        monotonic = time.monotonic
        pending = self.pending
        while True:
            message = await call.read()
            if message is EOF:
                return
            kind = message.WhichOneof("body")
            received[kind] += 1
            if kind == "decision_request":
                got = monotonic()
                request = message.decision_request
                if request.legal_shows:
                    action = game_pb2.Action(show=request.legal_shows[0])
                else:
                    action = game_pb2.Action(scout=request.legal_scouts[0])
                answer = arena_pb2.BotMessage(
                    action=arena_pb2.ActionChoice(
                        match_id=request.match_id, request_id=request.request_id, action=action
                    )
                )
                now = monotonic()
                client.own.add(now, now - got)
                if client.lean:
                    client.request_log.add(got, (request.match_id, request.request_id))
                    client.answer_log.add(now, (request.match_id, request.request_id))
                else:
                    pending[request.request_id] = now
                await call.write(answer)
            elif kind == "rotation_request":
                rotation = message.rotation_request
                if client.lean:
                    client.rotations += 1
                else:
                    pending[rotation.request_id] = -1.0
                await call.write(
                    arena_pb2.BotMessage(
                        rotation=arena_pb2.RotationChoice(
                            match_id=rotation.match_id, request_id=rotation.request_id
                        )
                    )
                )
            elif kind == "answer_result":
                result = message.answer_result
                sent = pending.pop(result.request_id, None)
                if result.status != arena_pb2.ANSWER_STATUS_ACCEPTED or sent is None:
                    client.problems[arena_pb2.AnswerStatus.Name(result.status)] += 1
                elif sent >= 0:
                    now = monotonic()
                    client.decisions.add(now, now - sent)
                else:
                    client.rotations += 1
            elif kind == "match_start":
                self.seat = message.match_start.seat
                pending.clear()
            elif kind == "match_ended":
                if self.seat == 0:
                    sys.stdout.write(f"E {message.match_ended.match_id}\n")
                    sys.stdout.flush()
                self.seat = -1
            elif kind == "error":
                client.problems[f"ProtocolError {message.error.code}"] += 1
            elif kind == "goodbye":
                client.problems["goodbye"] += 1


class SoakClient:
    """A client process: ``count`` bots from ``first``. Prints ``R {json}`` once all have
    connected (or failed); answers ``stats T0 T1`` like bench/trivial_bot.py."""

    def __init__(self, first: int, count: int, lean: bool = True) -> None:
        self.lean = lean
        """Lean streams, the SDK's default: no PublicEvents, no AnswerResult when accepted."""
        self.answer_log = TurnLog()
        self.request_log = TurnLog()
        self.bots = [SoakBot(self, i) for i in range(first, first + count)]
        self.decisions = Recorder()
        self.own = Recorder()
        self.rotations = 0
        self.received: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.stream_ends: Counter[str] = Counter()
        self.reconnects = 0
        self.connect_times: list[float] = []
        self.failed = 0
        self.stopping = False
        self.started = time.monotonic()
        self.ready_sent = False

    def connected(self, seconds: float) -> None:
        self.connect_times.append(seconds)
        self.check_ready()

    def check_ready(self) -> None:
        if self.ready_sent or len(self.connect_times) + self.failed < len(self.bots):
            return
        self.ready_sent = True
        # A bot that answers at once cannot stop for seconds to collect garbage: every bot of
        # the process would miss its clock together. The referee's own policy (freeze what is
        # connected, rare full collections) keeps the harness's collections short.
        tune_gc()
        times = sorted(self.connect_times)
        figures = {
            "connected": len(times),
            "failed": self.failed,
            "all_s": time.monotonic() - self.started,
            "p50_s": times[len(times) // 2] if times else None,
            "max_s": times[-1] if times else None,
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        }
        sys.stdout.write("R " + json.dumps(figures) + "\n")
        sys.stdout.flush()

    def stats(self, t0: float, t1: float) -> JSON:
        count, latencies = self.decisions.window(t0, t1)
        _, own = self.own.window(t0, t1)
        logs: JSON = {}
        if self.lean:
            logs["answers"] = self.answer_log.window(t0, t1)
            logs["requests"] = self.request_log.window(t0, t1 + 30.0)
            count = len(logs["answers"])
        return {
            "decisions": count,
            "latencies_us": latencies,
            "own_us": own,
            **logs,
            "rotations": self.rotations,
            "received": dict(self.received),
            "problems": dict(self.problems),
            "stream_ends": dict(self.stream_ends),
            "reconnects": self.reconnects,
            "connected": len(self.connect_times),
            "failed": self.failed,
            "rss_kb": proc_status_kb(os.getpid()).get("VmRSS", 0),
        }


async def client_main(
    address: str, first: int, count: int, concurrency: int, lean: bool = True
) -> int:
    raise_nofile()
    client = SoakClient(first, count, lean)
    gate = asyncio.Semaphore(concurrency)
    tasks = [asyncio.create_task(bot.run(address, gate)) for bot in client.bots]
    await serve_commands(client.stats)
    client.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0
