"""The soak's driver side: the client processes it starts, and the keeper that holds a
number of matches running out of a pool of idle bots."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from procs import Child
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc

ADMIN_TOKEN = "soak-admin"
MAX_CREATING = 32
"""CreateMatch calls the driver keeps in flight at once (``--create-concurrency``)."""


class ClientChild(Child):
    """A client process whose ``E <match id>`` lines go to a callback."""

    on_match_end: Any = None

    def _take(self, line: str) -> None:
        if line.startswith("E ") and self.on_match_end is not None:
            self.on_match_end(line[2:])
        else:
            self.lines.put_nowait(line)


async def spawn_client(name: str, argv: Sequence[str], log_dir: Path) -> ClientChild:
    log = (log_dir / f"{name}.log").open("w")
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
        limit=1 << 28,
    )
    log.close()
    child = ClientChild(name, process)
    child.pump = asyncio.get_running_loop().create_task(child._pump())
    return child


@dataclass
class Keeper:
    """Keeps ``target`` matches running out of a pool of idle bots."""

    stub: matches_pb2_grpc.MatchesAsyncStub
    idle: deque[str]
    players: int
    target: int
    time_control: game_pb2.TimeControl
    active: bool = True
    running: dict[str, list[str]] = field(default_factory=dict)
    created: int = 0
    finished: int = 0
    create_latencies_us: list[int] = field(default_factory=list)
    replace_latencies_us: list[int] = field(default_factory=list)  # creates after a match ended
    errors: Counter[str] = field(default_factory=Counter)
    last_errors: dict[str, str] = field(default_factory=dict)
    early_ends: set[str] = field(default_factory=set)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    seed: int = 1
    create_concurrency: int = MAX_CREATING
    create_batch: int = 1
    """Above 1: matches are made by CreateMatches calls of up to this many, not CreateMatch."""
    batch_sizes: list[int] = field(default_factory=list)
    in_flight: asyncio.Semaphore = field(init=False)
    """An organiser's client keeps a bounded number of calls open (and backs off on errors)."""

    def __post_init__(self) -> None:
        self.in_flight = asyncio.Semaphore(self.create_concurrency)

    async def create(self, replacing: bool = False) -> None:
        metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        while self.active:
            if len(self.idle) < self.players:
                self.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), 1.0)
                continue
            bots = [self.idle.popleft() for _ in range(self.players)]
            request = matches_pb2.CreateMatchRequest(
                bots=bots, seed=self.seed, time_control=self.time_control
            )
            self.seed += 1
            async with self.in_flight:
                started = time.perf_counter()
                try:
                    info = await self.stub.CreateMatch(request, metadata=metadata, timeout=30)
                except grpc.aio.AioRpcError as exc:
                    code = exc.code().name
                    self.errors[code] += 1
                    self.last_errors[code] = exc.details() or ""
                    self.idle.extend(bots)  # a busy or disconnected bot goes to the back
                    failed = True
                else:
                    failed = False
            if failed:
                await asyncio.sleep(0.5)
                continue
            latency = round((time.perf_counter() - started) * 1e6)
            self.create_latencies_us.append(latency)
            if replacing:
                self.replace_latencies_us.append(latency)
            self.created += 1
            self.running[info.match_id] = bots
            if info.match_id in self.early_ends:
                self.early_ends.discard(info.match_id)
                self.on_end(info.match_id)
            return

    async def create_many(self, count: int, replacing: bool = False) -> int:
        """Up to ``count`` matches (at most ``create_batch``) in one CreateMatches call, from
        the idle bots there are; how many were made."""
        tables = min(count, self.create_batch, len(self.idle) // self.players)
        if tables <= 0:
            return 0
        seated = [[self.idle.popleft() for _ in range(self.players)] for _ in range(tables)]
        requests = []
        for bots in seated:
            requests.append(
                matches_pb2.CreateMatchRequest(
                    bots=bots, seed=self.seed, time_control=self.time_control
                )
            )
            self.seed += 1
        metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        async with self.in_flight:
            started = time.perf_counter()
            try:
                reply = await self.stub.CreateMatches(
                    matches_pb2.CreateMatchesRequest(matches=requests),
                    metadata=metadata,
                    timeout=30,
                )
            except grpc.aio.AioRpcError as exc:
                code = exc.code().name
                self.errors[code] += len(seated)
                self.last_errors[code] = exc.details() or ""
                for bots in seated:
                    self.idle.extend(bots)
                await asyncio.sleep(0.5)
                return 0
        latency = round((time.perf_counter() - started) * 1e6)
        self.create_latencies_us.append(latency)
        if replacing:
            self.replace_latencies_us.append(latency)
        self.batch_sizes.append(tables)
        made = 0
        for bots, result in zip(seated, reply.results, strict=True):
            if result.WhichOneof("outcome") != "match":
                self.errors[result.error.code] += 1
                self.last_errors[result.error.code] = result.error.message
                self.idle.extend(bots)
                continue
            made += 1
            self.created += 1
            match_id = result.match.match_id
            self.running[match_id] = bots
            if match_id in self.early_ends:
                self.early_ends.discard(match_id)
                self.on_end(match_id)
        return made

    async def fill_in_batches(self) -> None:
        while self.active and len(self.running) < self.target:
            if not await self.create_many(self.target - len(self.running)):
                await asyncio.sleep(0.05)

    async def replenish(self) -> None:
        """Batch mode: tops the running matches up to ``target`` as they end."""
        while self.active:
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), 1.0)
            while (
                self.active and len(self.running) < self.target and len(self.idle) >= self.players
            ):
                await self.create_many(self.target - len(self.running), replacing=True)

    def spawn_create(self) -> None:
        if self.create_batch > 1:
            return  # `replenish` tops up
        task = asyncio.get_running_loop().create_task(self.create(replacing=True))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def on_end(self, match_id: str) -> None:
        bots = self.running.pop(match_id, None)
        if bots is None:
            self.early_ends.add(match_id)
            return
        self.finished += 1
        self.idle.extend(bots)
        self.wakeup.set()
        if self.active:
            self.spawn_create()
