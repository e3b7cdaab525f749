"""The in-process harness of the Matches service tests (tests/test_matches_service_*.py): a referee
served on 127.0.0.1, raw bots, and short ways to make requests and wait."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc
import pytest
from referee_support import (
    ADMIN_TOKEN,
    admin_metadata,
)
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server import Referee, RefereeServer
from scout_rules.protocol import TimeControl

T = TypeVar("T")


ADMIN = tuple(admin_metadata())


RUNNING = matches_pb2.MATCH_STATUS_RUNNING


FINISHED = matches_pb2.MATCH_STATUS_FINISHED


ABORTED = matches_pb2.MATCH_STATUS_ABORTED


LONG = game_pb2.TimeControl(decision_ms=60_000, time_bank_ms=1000)


"""A match that stays in its first rotation while the test looks at it."""


QUICK = TimeControl(20, 1)


"""A referee default under which bots that never answer forfeit in a few hundred ms and the
fallback plays the match out."""


TOKENS = {name: f"token-{name}" for name in ("a", "b", "c", "d", "e", "f")}


MAX_DETAILS = 400


class RawBot:
    """A bot stream that says Hello and then never answers (matches it sits in are played
    out by timeouts, forfeits and the fallback)."""

    def __init__(self, channel: grpc.aio.Channel, call: Any) -> None:
        self.channel = channel
        self.call = call

    @classmethod
    async def connect(cls, address: str, token: str, max_matches: int = 1) -> RawBot:
        channel = grpc.aio.insecure_channel(address)
        call = arena_pb2_grpc.ArenaStub(channel).Play(
            None, metadata=(("authorization", f"Bearer {token}"),)
        )
        await call.write(
            arena_pb2.BotMessage(
                hello=arena_pb2.Hello(protocol_version=1, max_concurrent_matches=max_matches)
            )
        )
        welcome = await call.read()
        assert isinstance(welcome, arena_pb2.RefereeMessage), welcome
        assert welcome.WhichOneof("body") == "welcome", welcome
        return cls(channel, call)

    async def close(self) -> None:
        await self.channel.close(None)


@contextlib.asynccontextmanager
async def serving(
    referee: Referee, bots: Sequence[str] = ()
) -> AsyncIterator[tuple[RefereeServer, matches_pb2_grpc.MatchesAsyncStub, dict[str, RawBot]]]:
    server = RefereeServer(referee, admin_token=ADMIN_TOKEN)
    await server.start()
    connected: dict[str, RawBot] = {}
    channel = grpc.aio.insecure_channel(server.address)
    try:
        for name in bots:
            connected[name] = await RawBot.connect(server.address, TOKENS[name])
        yield server, matches_pb2_grpc.MatchesStub(channel), connected
    finally:
        await channel.close(None)
        for bot in connected.values():
            await bot.close()
        await server.stop()


async def rpc_error(call: Awaitable[Any]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def wait_until(condition: Callable[[], Awaitable[T | None]], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await condition()
        if value is not None:
            return value
        await asyncio.sleep(0.02)
    raise TimeoutError("condition not met in time")


def create_request(
    bots: Sequence[str],
    seed: int | None = None,
    key: str = "",
    time_control: game_pb2.TimeControl | None = None,
) -> matches_pb2.CreateMatchRequest:
    request = matches_pb2.CreateMatchRequest(bots=list(bots), idempotency_key=key)
    if seed is not None:
        request.seed = seed
    if time_control is not None:
        request.time_control.CopyFrom(time_control)
    return request
