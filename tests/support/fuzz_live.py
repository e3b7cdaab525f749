"""The live referee tests/test_fuzz_bot_messages.py shares: its event-loop thread, the honest
keepers that keep matches finishing, and the fuzzing bot's seat in it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import (
    RefereeProcess,
    admin_metadata,
)
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc

from support.fuzz_bot import FuzzBot
from support.fuzz_oracle import (
    EXAMPLE_S,
    FINISHED,
    FUZZ,
    HELLO_TIMEOUT_S,
    HONEST_DECISION_MS,
    HONEST_TABLES,
    REACTION_S,
    SERVING,
    SHAKER,
    SILENT,
    TOKENS,
    T,
)
from support.rawbot import (
    LOCAL_POOL,
    RawCall,
)


class LoopThread:
    """An asyncio loop in a daemon thread: the live clients stay up between hypothesis examples,
    which are plain synchronous calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fuzz-loop")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = EXAMPLE_S) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"hang: no result within {timeout} s") from None

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_all(), 20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Keeper:
    """Matches of honest bots, created one after another for as long as the module runs."""

    bots: tuple[str, ...]
    created: list[str] = field(default_factory=list)
    finished: list[matches_pb2.MatchInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Live:
    def __init__(self, referee: RefereeProcess, loop: LoopThread) -> None:
        self.referee = referee
        self.address = referee.address
        self.loop = loop
        self.keepers = [Keeper(bots) for bots in HONEST_TABLES]
        self.fuzz_matches: list[str] = []
        self.silent_result: tuple[grpc.StatusCode | None, float] | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = EXAMPLE_S) -> T:
        return self.loop.run(coro, timeout)

    async def start(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.address)
        self.matches = matches_pb2_grpc.MatchesStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.tasks = [asyncio.get_running_loop().create_task(self._keep(k)) for k in self.keepers]
        self.tasks.append(asyncio.get_running_loop().create_task(self._silent()))
        self.fuzz = FuzzBot(self, FUZZ)
        await self.fuzz.connect()
        self.shaker_channel = grpc.aio.insecure_channel(self.address, options=LOCAL_POOL)

    async def stop(self) -> None:
        self.stopping = True
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.fuzz.call is not None:
            await self.fuzz.call.close()
        await self.fuzz.channel.close(None)
        await self.shaker_channel.close(None)
        await self.channel.close(None)

    async def _keep(self, keeper: Keeper) -> None:
        seed = 7000 + len(keeper.bots)
        while not self.stopping:
            seed += 1
            try:
                info = await self.matches.CreateMatch(
                    matches_pb2.CreateMatchRequest(
                        bots=list(keeper.bots),
                        seed=seed,
                        time_control=game_pb2.TimeControl(decision_ms=HONEST_DECISION_MS),
                    ),
                    metadata=admin_metadata(),
                    timeout=10,
                )
                keeper.created.append(info.match_id)
                async for _ in self.matches.WatchMatch(
                    matches_pb2.WatchMatchRequest(match_id=info.match_id),
                    metadata=admin_metadata(),
                    timeout=120,
                ):
                    pass
                final = await self.get_match(info.match_id)
                keeper.finished.append(final)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                keeper.errors.append(repr(exc))
                await asyncio.sleep(0.5)

    async def _silent(self) -> None:
        """A call that never sends anything: §3.3 ends it with DEADLINE_EXCEEDED after 10 s."""
        async with grpc.aio.insecure_channel(self.address, options=LOCAL_POOL) as channel:
            call = RawCall(channel, TOKENS[SILENT], bound=REACTION_S)
            opened = time.monotonic()
            try:
                code, _ = await call.wait_ended(HELLO_TIMEOUT_S + 30)
            except TimeoutError:
                code = None
            self.silent_result = (code, time.monotonic() - opened)
            await call.close()

    async def get_match(self, match_id: str) -> matches_pb2.MatchInfo:
        info: matches_pb2.MatchInfo = await self.matches.GetMatch(
            matches_pb2.GetMatchRequest(match_id=match_id), metadata=admin_metadata(), timeout=10
        )
        return info

    async def check_health(self) -> None:
        assert self.referee.process.poll() is None, "the referee process died"
        for service in ("", "scout.v1.Arena"):
            response = await self.health.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=10
            )
            assert response.status == SERVING, (service, response)

    async def honest_finished(self) -> int:
        response = await self.matches.ListMatches(
            matches_pb2.ListMatchesRequest(status=FINISHED, limit=1_000_000),
            metadata=admin_metadata(),
            timeout=10,
        )
        return sum(1 for m in response.matches if not set(m.bots) & {FUZZ, SHAKER, SILENT})

    async def wait_more_honest(self, before: int, timeout: float = 90.0) -> int:
        """Wait (bounded) until more honest matches have finished than ``before``."""
        deadline = time.monotonic() + timeout
        while True:
            now = await self.honest_finished()
            if now > before:
                return now
            errors = [e for k in self.keepers for e in k.errors]
            assert not errors, f"honest keepers failed: {errors}"
            assert time.monotonic() < deadline, (
                f"no honest match finished within {timeout} s (still {now})"
            )
            await asyncio.sleep(0.2)

    async def record(self, match_id: str) -> dict[str, Any]:
        response = await self.matches.GetRecord(
            matches_pb2.GetRecordRequest(match_id=match_id), metadata=admin_metadata(), timeout=10
        )
        record: dict[str, Any] = json.loads(response.record_json)
        return record
