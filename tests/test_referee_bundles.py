"""Bundles (PROTOCOL.md §3.6.2): what piles up for a stream that accepts them goes as one
RefereeBundle, a BotBundle's answers are read in order as if each came alone, and a request's
clock starts once its write has completed. Against a real in-process referee and raw bots."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest
from scout.v1 import arena_pb2
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.arena_service import StreamWriter
from scout_arena.server.connections import BotConnection, BotEntry, GoodbyeMessage, Handoff, Outbox
from scout_arena.server.convert import MAX_BUNDLE_MESSAGES, ProtobufWire, bundle_bytes
from scout_rules.protocol import TimeControl
from support.rawbot import (
    RawBot,
    body,
    greeted,
    hello,
    kind_of,
    legal_answer,
    rotation_choice,
)
from support.serving import served

TOKENS = {name: f"token-{name}" for name in ("a", "b")}
T = TypeVar("T")


def run(scenario: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
    return asyncio.run(asyncio.wait_for(scenario, timeout))


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[tuple[Referee, RefereeServer]]:
    referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=TimeControl(5000, 10_000))
    async with served(referee) as server:
        yield referee, server


async def connect(server: RefereeServer, name: str, bundles: bool) -> RawBot:
    return await greeted(server.address, TOKENS[name], name, lean=True, bundles=bundles,
                         max_matches=8)


def bundle(*messages: arena_pb2.BotMessage) -> arena_pb2.BotMessage:
    return arena_pb2.BotMessage(bundle=arena_pb2.BotBundle(messages=messages))


def kinds_about(bot: RawBot, match_id: str) -> Counter[str]:
    return Counter(kind_of(m) or "" for m in bot.messages
                   if getattr(body(m), "match_id", None) == match_id)


# ----- the wire format --------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[0], [3, 5], [1, 126, 127, 128], [20_000, 5, 300]])
def test_bundle_bytes_are_the_protobuf_encoding_of_the_bundle(sizes: list[int]) -> None:
    messages = [arena_pb2.RefereeMessage(error=arena_pb2.ProtocolError(message="x" * size))
                for size in sizes]
    expected = arena_pb2.RefereeMessage(bundle=arena_pb2.RefereeBundle(messages=messages))
    made = bundle_bytes([m.SerializeToString() for m in messages])
    assert made == expected.SerializeToString()
    assert list(arena_pb2.RefereeMessage.FromString(made).bundle.messages) == messages


# ----- the outbox -------------------------------------------------------------------------------


def test_the_outbox_gives_what_piled_up_and_a_goodbye_or_the_stop_alone() -> None:
    async def scenario() -> None:
        outbox = Outbox()
        request = Handoff(b"r" * 10, lambda: None)
        for item in (b"a", request, b"b", GoodbyeMessage(b"bye"), b"c", None):
            outbox.put(item)
        assert await outbox.take(100, 1 << 20) == [b"a", request, b"b"]
        assert await outbox.take(100, 1 << 20) == [GoodbyeMessage(b"bye")]
        assert await outbox.take(100, 1 << 20) == [b"c"]
        assert await outbox.take(100, 1 << 20) == [None]
        for item in (b"1", b"22", b"333", b"4444"):
            outbox.put(item)
        assert await outbox.take(1) == [b"1"]
        assert await outbox.take(100, 5) == [b"22", b"333"]  # the byte cap counts past the first
        assert await outbox.take(2, 1) == [b"4444"]  # the first always goes, whatever its size
        waiting = asyncio.ensure_future(outbox.take(10, 100))
        await asyncio.sleep(0)
        assert not waiting.done()
        outbox.put(b"late")
        assert await waiting == [b"late"]

    run(scenario(), timeout=10)


class SlowWrites:
    """A stand-in for the stream's context whose writes complete only when a test says so."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.done = asyncio.Event()

    async def write(self, data: bytes) -> None:
        self.written.append(data)
        await self.done.wait()


def test_a_requests_clock_starts_once_its_write_has_completed() -> None:
    """Not when the write is begun: a write the transport has not finished taking (grpc's
    queue inside the referee, or a loop too busy to see it done) is the referee's time."""
    async def scenario() -> None:
        connection = BotConnection(BotEntry("a", "token-a"), "s", 4, "v")
        connection.accepts_bundles = True
        started: list[str] = []
        context = SlowWrites()
        writer = asyncio.ensure_future(
            StreamWriter().run(connection, context, asyncio.Event()))  # type: ignore[arg-type]
        connection.send(Handoff(b"one", lambda: started.append("one")))
        connection.send(Handoff(b"two", lambda: started.append("two")))
        for _ in range(5):
            await asyncio.sleep(0)
        assert context.written == [bundle_bytes([b"one", b"two"])]
        assert started == []
        context.done.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == ["one", "two"]
        connection.close()
        await asyncio.wait_for(writer, 5)

    run(scenario(), timeout=10)


# ----- bundles on a live stream -----------------------------------------------------------------


def test_a_stream_that_accepts_bundles_gets_them_and_plays_every_match_as_one_that_does_not(
        ) -> None:
    """Four matches between a (accepts bundles) and b (does not): a gets what piled up as
    bundles, b never one, and each sees exactly the messages of a lean stream."""
    async def scenario() -> None:
        async with serving() as (referee, server):
            a = await connect(server, "a", bundles=True)
            b = await connect(server, "b", bundles=False)
            matches = [referee.create_match(["a", "b"] if i % 2 else ["b", "a"], seed=40 + i)
                       for i in range(4)]
            await asyncio.gather(*(bot.play_to_end(m.match_id, 90)
                                   for m in matches for bot in (a, b)))
            for match in matches:
                assert match.task is not None
                await match.task
                record = match.record
                assert record is not None and record.notes == ()
                rounds = len(record.rounds)
                actions = [seat for r in record.rounds for seat, _ in r.actions]
                for bot, name in ((a, "a"), (b, "b")):
                    seat = match.names.index(name)
                    assert kinds_about(bot, match.match_id) == Counter({
                        "match_start": 1, "rotation_request": rounds,
                        "decision_request": actions.count(seat), "round_ended": rounds,
                        "match_ended": 1})
            assert a.bundle_sizes and max(a.bundle_sizes) >= 2, a.bundle_sizes
            assert b.bundle_sizes == []
            assert not {kind_of(m) for m in a.messages} & {"bundle", "goodbye"}
            await a.close()
            await b.close()

    run(scenario())


def test_the_answers_of_a_bot_bundle_are_read_in_order_as_if_each_came_alone() -> None:
    async def scenario() -> None:
        async with serving() as (referee, server):
            a = await connect(server, "a", bundles=True)
            b = await connect(server, "b", bundles=False)
            first = referee.create_match(["a", "b"], seed=1)
            second = referee.create_match(["a", "b"], seed=2)
            asked = [await a.expect("rotation_request", m.match_id) for m in (first, second)]
            await a.send(bundle(
                rotation_choice(first.match_id, asked[0].request_id),
                hello("again"),
                bundle(rotation_choice(second.match_id, asked[1].request_id)),
                rotation_choice(second.match_id, asked[1].request_id)))
            errors = [await a.expect("error") for _ in range(2)]
            assert [e.code for e in errors] == [arena_pb2.ERROR_CODE_BAD_MESSAGE] * 2
            assert errors[0].message == "Hello is sent once, first, on its own"
            assert "inside a BotBundle" in errors[1].message
            for match in (first, second):
                other = await b.expect("rotation_request", match.match_id)
                await b.send(legal_answer(arena_pb2.RefereeMessage(rotation_request=other)))
            for match in (first, second):
                # Both rotations were accepted: each match asks for its first decision.
                await asyncio.wait_for(_decision_asked(match, a, b), 20)
            assert a.ended is False
            for match in (first, second):
                assert match.record is None
                assert match.seats[0].strikes == 0
            await referee.shutdown()
            await a.close()
            await b.close()

    run(scenario())


async def _decision_asked(match: Any, *bots: RawBot) -> None:
    while not any(kind_of(m) == "decision_request"
                  and body(m).match_id == match.match_id for bot in bots for m in bot.messages):
        await asyncio.sleep(0.02)


def test_an_empty_or_oversized_bot_bundle_is_refused_whole_and_the_stream_goes_on() -> None:
    async def scenario() -> None:
        async with serving() as (referee, server):
            a = await connect(server, "a", bundles=True)
            b = await connect(server, "b", bundles=False)
            match = referee.create_match(["a", "b"], seed=3)
            asked = await a.expect("rotation_request", match.match_id)
            answer = rotation_choice(match.match_id, asked.request_id)
            await a.send(bundle(*[answer] * (MAX_BUNDLE_MESSAGES + 1)))
            error = await a.expect("error")
            assert error.code == arena_pb2.ERROR_CODE_BAD_MESSAGE
            assert error.message == (f"a BotBundle holds at most {MAX_BUNDLE_MESSAGES} "
                                     f"messages, this one {MAX_BUNDLE_MESSAGES + 1}: none of "
                                     "them was read")
            await a.send(bundle())
            empty = await a.expect("error")
            assert empty.code == arena_pb2.ERROR_CODE_BAD_MESSAGE
            assert empty.message.startswith("the BotBundle is empty")
            await a.send(bundle(answer))  # a bundle of one is fine
            await asyncio.gather(a.play_to_end(match.match_id, 60),
                                 b.play_to_end(match.match_id, 60))
            assert match.task is not None
            await match.task
            assert match.record is not None and match.record.notes == ()
            await a.close()
            await b.close()

    run(scenario())
