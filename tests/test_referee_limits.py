"""The referee's resource limits (PROTOCOL.md §11.5): open files raised to the hard limit and
reported, HTTP/2 streams per connection capped, Play streams per bot token capped, and every
token compared in constant time.

Real servers on 127.0.0.1 (in process, or `scout-arena referee serve`), raw grpc channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import resource
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from scout.v1 import arena_pb2, arena_pb2_grpc, matches_pb2, matches_pb2_grpc
from scout_arena.server import Referee, RefereeServer, connections
from scout_arena.server.arena_service import MAX_STREAMS_PER_TOKEN
from scout_arena.server.calls import EOF
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.limits import FD_RESERVE, raise_fd_limit
from scout_arena.server.listener import MAX_STREAMS_PER_CONNECTION

pytestmark = pytest.mark.timeout(120)

LOCAL_POOL = [("grpc.use_local_subchannel_pool", 1)]
BUDGET_S = 20.0


@contextlib.asynccontextmanager
async def serving(tokens: dict[str, str] | None = None, **options: Any
                  ) -> AsyncIterator[RefereeServer]:
    server = RefereeServer(Referee(tokens or {}, wire=ProtobufWire()), admin_token="adm", **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# ----- open files -------------------------------------------------------------------------------


def test_the_referee_raises_its_open_file_limit_and_reports_the_connections_it_can_hold(
        tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256
    if hard != resource.RLIM_INFINITY and hard <= low:
        pytest.skip(f"the hard open-file limit ({hard}) leaves nothing to raise")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    # `referee serve` started with the soft limit lowered: it raises it and says so.
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "scout_arena.cli", "referee", "serve", "--port", "0",
         "--records", str(tmp_path / "records"), "-v"],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, preexec_fn=lower)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on" in line, log.read_text()
    finally:
        process.terminate()
        process.wait(30)
    text = log.read_text()
    found = re.search(r"open-file limit raised from 256 to (\d+) \(hard limit (\S+)\): room "
                      r"for about (\d+) bot connections", text)
    assert found, text
    raised, connections_room = int(found.group(1)), int(found.group(3))
    if hard != resource.RLIM_INFINITY:
        assert raised == hard and found.group(2) == str(hard)
    assert connections_room == raised - FD_RESERVE


def test_raise_fd_limit_sets_the_soft_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if hard == resource.RLIM_INFINITY or hard > 512:
            resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
        limit = raise_fd_limit()
        assert limit is not None
        now, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert limit.soft == now and limit.connections == now - FD_RESERVE
        if hard != resource.RLIM_INFINITY:
            assert now == hard and limit.hard == hard
        assert "room for about" in limit.describe()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, resource.getrlimit(
            resource.RLIMIT_NOFILE)[0]), hard))


def test_the_server_reports_its_fd_limit_when_it_starts() -> None:
    async def main() -> None:
        async with serving() as server:
            assert server.fd_limit is not None
            assert server.fd_limit.soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    asyncio.run(main())


# ----- HTTP/2 streams per connection -----------------------------------------------------------


def test_a_connection_gets_at_most_the_configured_number_of_concurrent_streams() -> None:
    """With the default cap open as health Watch streams on one connection, another call on
    that connection waits for a free stream (never served meanwhile), while a new connection
    is served at once; ending one stream lets the waiting call through."""
    async def main() -> None:
        async with serving() as server:
            assert server.max_streams_per_connection == MAX_STREAMS_PER_CONNECTION == 1000
            channel = grpc.aio.insecure_channel(server.address, options=LOCAL_POOL)
            stub = health_pb2_grpc.HealthStub(channel)
            watches = [stub.Watch(health_pb2.HealthCheckRequest())
                       for _ in range(MAX_STREAMS_PER_CONNECTION)]
            try:
                for watch in watches:  # each is open at the server: it answered
                    first = await asyncio.wait_for(watch.read(), BUDGET_S)
                    assert first.status == health_pb2.HealthCheckResponse.SERVING
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                async with grpc.aio.insecure_channel(server.address,
                                                     options=LOCAL_POOL) as other:
                    reply = await health_pb2_grpc.HealthStub(other).Check(
                        health_pb2.HealthCheckRequest(), timeout=BUDGET_S)
                    assert reply.status == health_pb2.HealthCheckResponse.SERVING
                waiting = asyncio.ensure_future(
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=BUDGET_S))
                watches.pop().cancel()
                assert (await waiting).status == health_pb2.HealthCheckResponse.SERVING
            finally:
                for watch in watches:
                    watch.cancel()
                await channel.close(None)

    asyncio.run(main())


def test_the_stream_cap_is_configurable() -> None:
    async def main() -> None:
        async with serving(max_streams_per_connection=2) as server:
            channel = grpc.aio.insecure_channel(server.address, options=LOCAL_POOL)
            stub = health_pb2_grpc.HealthStub(channel)
            watches = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(2)]
            try:
                for watch in watches:
                    await asyncio.wait_for(watch.read(), BUDGET_S)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            finally:
                for watch in watches:
                    watch.cancel()
                await channel.close(None)

    asyncio.run(main())


# ----- Play streams per token -------------------------------------------------------------------


PlayCall = grpc.aio.StreamStreamCall[arena_pb2.BotMessage, arena_pb2.RefereeMessage]


def play(address: str, token: str) -> tuple[grpc.aio.Channel, PlayCall]:
    channel = grpc.aio.insecure_channel(address, options=LOCAL_POOL)
    call = arena_pb2_grpc.ArenaStub(channel).Play(None, metadata=(("authorization",
                                                                   f"Bearer {token}"),))
    return channel, call


async def next_message(call: PlayCall) -> arena_pb2.RefereeMessage:
    """The next message of ``call``, which grpc's stubs type as possibly EOF."""
    message = await call.read()
    assert isinstance(message, arena_pb2.RefereeMessage), message
    return message


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BUDGET_S
    while not condition():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.01)


HELLO = arena_pb2.BotMessage(hello=arena_pb2.Hello(protocol_version=1))


def test_play_streams_per_token_are_capped_and_the_newer_stream_still_wins() -> None:
    async def main() -> None:
        async with serving({"a": "token-a", "b": "token-b"}) as server:
            bot = server.referee.bots.get("a")
            assert bot is not None
            opened = [play(server.address, "token-a") for _ in range(MAX_STREAMS_PER_TOKEN)]
            try:
                for _, call in opened:  # start each call (streams waiting for their Hello)
                    await call.wait_for_connection()
                await until(lambda: bot.open_streams == MAX_STREAMS_PER_TOKEN,
                            "the streams were not all counted")
                channel, extra = play(server.address, "token-a")
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(extra.read(), BUDGET_S)
                await channel.close(None)
                assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert f"already has {MAX_STREAMS_PER_TOKEN} Play streams open" in \
                    (caught.value.details() or "")
                # another token is not affected
                channel_b, call_b = play(server.address, "token-b")
                await call_b.write(HELLO)
                welcome = await asyncio.wait_for(next_message(call_b), BUDGET_S)
                assert welcome.WhichOneof("body") == "welcome"
                call_b.cancel()
                await channel_b.close(None)
                # one stream ends: there is room again, and the newer-wins rule holds
                closing_channel, closing = opened.pop()
                closing.cancel()
                await closing_channel.close(None)
                await until(lambda: bot.open_streams == MAX_STREAMS_PER_TOKEN - 1,
                            "the cancelled stream was not released")
                _, older = opened[0]
                await older.write(HELLO)
                assert (await next_message(older)).WhichOneof("body") == "welcome"
                newer_channel, newer = play(server.address, "token-a")
                opened.append((newer_channel, newer))
                await newer.write(HELLO)
                assert (await next_message(newer)).WhichOneof("body") == "welcome"
                with contextlib.suppress(grpc.aio.AioRpcError):
                    while await older.read() is not EOF:
                        pass
                assert await older.code() == grpc.StatusCode.ABORTED
                assert "superseded" in (await older.details() or "")
            finally:
                for channel, call in opened:
                    call.cancel()
                    await channel.close(None)
            await until(lambda: bot.open_streams == 0, "streams were not released")

    asyncio.run(main())


# ----- tokens compared in constant time ---------------------------------------------------------


def test_bot_and_admin_tokens_are_compared_in_constant_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)

    async def main() -> None:
        async with serving({"a": "token-a"}) as server:
            registry = server.referee.bots
            # the registry is keyed by digests: no lookup compares a token's own bytes
            assert all(isinstance(key, bytes) and len(key) == 32 for key in registry._by_token)
            assert "token-a" not in registry._by_token  # type: ignore[comparison-overlap]
            async with grpc.aio.insecure_channel(server.address, options=LOCAL_POOL) as ch:
                call = arena_pb2_grpc.ArenaStub(ch).Play(
                    None, metadata=(("authorization", "Bearer token-a"),))
                await call.write(HELLO)
                assert (await next_message(call)).WhichOneof("body") == "welcome"
                assert (b"token-a", b"token-a") in compared
                call.cancel()
                matches = matches_pb2_grpc.MatchesStub(ch)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await matches.ListMatches(matches_pb2.ListMatchesRequest(), timeout=5,
                                              metadata=[("authorization", "Bearer adx")])
                assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert (b"adx", b"adm") in compared
                await matches.ListMatches(matches_pb2.ListMatchesRequest(), timeout=5,
                                          metadata=[("authorization", "Bearer adm")])

    asyncio.run(main())


def test_token_comparison_takes_any_characters() -> None:
    """`secrets.compare_digest` raises TypeError for str with non-ASCII characters."""
    assert connections.tokens_equal("tökén", "tökén")
    assert not connections.tokens_equal("tökén", "token")
    registry = connections.BotRegistry({"a": "tökén"})
    assert registry.bot_for_token("tökén") is registry.get("a")
    assert registry.bot_for_token("token") is None
    registry.register("a", "new")  # a new token replaces the old one
    assert registry.bot_for_token("tökén") is None
    assert registry.bot_for_token("new") is registry.get("a")
