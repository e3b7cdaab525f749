"""Lean streams (PROTOCOL.md §3.6.1), the fair clock (§7: a request's time runs from its hand-off
to the transport) and the record's notes, against a real in-process referee and raw bots."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import grpc
import pytest
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import record_to_json
from scout_arena.server import Referee, RefereeServer, clock
from scout_arena.server.arena_service import StreamWriter, _let_writer_finish
from scout_arena.server.calls import ArenaContext
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.match import MatchRunner
from scout_arena.server.seat import Seat
from scout_rules.protocol import TimeControl
from support.rawbot import (
    ACCEPTED,
    MALFORMED,
    STALE,
    RawBot,
    action_choice,
    body,
    greeted,
    hello,
    kind_of,
    legal_answer,
    rejected,
    rotation_choice,
)
from support.serving import served

TOKENS = {name: f"token-{name}" for name in ("a", "b", "c", "d")}
T = TypeVar("T")


def run(scenario: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
    return asyncio.run(asyncio.wait_for(scenario, timeout))


@contextlib.asynccontextmanager
async def serving(tc: TimeControl | None = None, writer: StreamWriter | None = None
                  ) -> AsyncIterator[tuple[Referee, RefereeServer]]:
    referee = Referee(TOKENS, wire=ProtobufWire(),
                      default_time_control=tc or TimeControl(2000, 10_000))
    async with served(referee, stream_writer=writer) as server:
        yield referee, server


def carries_a_request(data: bytes) -> bool:
    message = arena_pb2.RefereeMessage.FromString(data)
    inner = message.bundle.messages if kind_of(message) == "bundle" else [message]
    return any(kind_of(each) in ("rotation_request", "decision_request") for each in inner)


class SlowHandoff(StreamWriter):
    """A deliberately slow referee: its writers hold each request ``delay_s`` before they hand
    it to the transport (a delay that must never be charged to the bot)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def transport(self, context: ArenaContext) -> Callable[[bytes], Awaitable[None]]:
        async def write(data: bytes) -> None:
            if carries_a_request(data):
                await asyncio.sleep(self.delay_s)
            await context.write(data)

        return write


async def connect(server: RefereeServer, name: str, lean: bool) -> RawBot:
    return await greeted(server.address, TOKENS[name], name, lean=lean)


def about(message: arena_pb2.RefereeMessage, match_id: str) -> bool:
    inner = body(message)
    return getattr(inner, "match_id", None) == match_id


def kinds(bot: RawBot, match_id: str) -> Counter[str]:
    """How many messages of each kind the bot got about the match; answer results by status."""
    counted: Counter[str] = Counter()
    for message in bot.messages:
        if not about(message, match_id):
            continue
        kind = kind_of(message)
        assert kind is not None
        if kind == "answer_result":
            kind += ":" + arena_pb2.AnswerStatus.Name(message.answer_result.status)
        counted[kind] += 1
    return counted


def comparable(record: Any) -> dict[str, Any]:
    data = record_to_json(record)
    return {key: data[key] for key in ("seed", "rounds", "totals", "ranks", "forfeits", "notes")}


# ----- lean streams -----------------------------------------------------------------------------


def test_a_lean_bot_gets_one_message_per_decision_and_a_full_bot_everything() -> None:
    async def scenario() -> None:
        async with serving() as (referee, server):
            bots = {name: await connect(server, name, lean=name in ("a", "d"))
                    for name in TOKENS}
            first = referee.create_match(["a", "b"], seed=11)
            second = referee.create_match(["c", "d"], seed=11)
            await asyncio.gather(bots["a"].play_to_end(first.match_id, 60),
                                 bots["b"].play_to_end(first.match_id, 60),
                                 bots["c"].play_to_end(second.match_id, 60),
                                 bots["d"].play_to_end(second.match_id, 60))
            for match in (first, second):
                assert match.task is not None
                await match.task
            assert first.record is not None and second.record is not None
            # The record is the same whichever seat is lean.
            assert comparable(first.record) == comparable(second.record)
            record = first.record
            rounds = len(record.rounds)
            actions = [seat for r in record.rounds for seat, _ in r.actions]
            for match, lean, full in ((first, "a", "b"), (second, "d", "c")):
                lean_seat = match.names.index(lean)
                full_seat = match.names.index(full)
                lean_requests = rounds + actions.count(lean_seat)
                full_requests = rounds + actions.count(full_seat)
                assert kinds(bots[lean], match.match_id) == Counter({
                    "match_start": 1, "rotation_request": rounds,
                    "decision_request": lean_requests - rounds, "round_ended": rounds,
                    "match_ended": 1})
                assert kinds(bots[full], match.match_id) == Counter({
                    "match_start": 1, "rotation_request": rounds,
                    "decision_request": full_requests - rounds,
                    "answer_result:ANSWER_STATUS_ACCEPTED": full_requests,
                    "public_event": len(actions), "round_ended": rounds, "match_ended": 1})
            for bot in bots.values():
                await bot.close()

    run(scenario())


def test_a_lean_bot_gets_its_rejections_at_once_and_no_accepted() -> None:
    async def scenario() -> None:
        async with serving() as (referee, server):
            lean = await connect(server, "a", lean=True)
            other = await connect(server, "b", lean=False)
            match = referee.create_match(["a", "b"], seed=3)
            mid = match.match_id
            rotation = await lean.expect("rotation_request", mid)
            # An ActionChoice naming the open rotation request: STALE, naming the right kinds.
            await lean.send(action_choice(mid, rotation.request_id, None))
            stale = await lean.result(mid, rotation.request_id, timeout=5)
            assert stale.status == STALE
            assert stale.reason == (f"request {rotation.request_id} is a rotation request: "
                                    "answer it with a RotationChoice, not an ActionChoice")
            await lean.send(rotation_choice(mid, rotation.request_id))
            other_task = asyncio.ensure_future(other.play_to_end(mid, 60))
            decision = await lean.decision(mid)
            too_long = game_pb2.Action(show=game_pb2.Show(start=0, length=99))
            await lean.send(action_choice(mid, decision.request_id, too_long))
            rejected = await lean.result(mid, decision.request_id, timeout=5)
            assert rejected.status == MALFORMED and rejected.strikes == 1
            await lean.send(action_choice(mid, decision.request_id, None))
            malformed = await lean.result(mid, decision.request_id, timeout=5)
            assert malformed.status == MALFORMED and malformed.strikes == 2
            await lean.send(legal_answer(arena_pb2.RefereeMessage(decision_request=decision)))
            await lean.play_to_end(mid, 60)
            await other_task
            assert match.task is not None
            await match.task
            statuses = [m.answer_result.status for m in lean.messages
                        if kind_of(m) == "answer_result"]
            assert ACCEPTED not in statuses and len(statuses) == 3
            assert not [m for m in lean.messages if kind_of(m) == "public_event"]
            assert match.record is not None
            notes = [n.kind for n in match.record.notes if n.seat == match.names.index("a")]
            assert notes == ["malformed_action", "strike", "malformed_action", "strike"]
            details = [n.detail for n in match.record.notes if n.kind == "strike"]
            assert details == ["strike 1 of 3 (malformed_action)",
                               "strike 2 of 3 (malformed_action)"]
            await lean.close()
            await other.close()

    run(scenario())


# ----- the fair clock ---------------------------------------------------------------------------


def test_time_a_request_waits_inside_the_referee_is_never_charged_to_the_bot() -> None:
    """The writer holds every request 0.35 s before handing it to the transport: more than the
    decision time and the bank together. Prompt bots lose nothing; the wait is the referee's."""

    async def answer_all(bot: RawBot, match_id: str, answered: list[int]) -> None:
        while True:
            message = await bot.request(match_id, 60)
            if kind_of(message) == "match_ended":
                return
            await bot.send(legal_answer(message))
            answered.append(1)

    async def scenario() -> None:
        async with serving(TimeControl(250, 50), SlowHandoff(0.35)) as (referee, server):
            bots = [await connect(server, name, lean=name == "a") for name in ("a", "b")]
            match = referee.create_match(["a", "b"], seed=5)
            answered: list[int] = []
            players = [asyncio.ensure_future(answer_all(bot, match.match_id, answered))
                       for bot in bots]
            while len(answered) < 8:
                await asyncio.sleep(0.05)
            await referee.shutdown()
            for task in players:
                task.cancel()
            await asyncio.gather(*players, return_exceptions=True)
            assert match.record is not None
            seats = match.record.meta["seats"]
            assert isinstance(seats, list)
            for seat in seats:
                assert list(seat)[-1] == "referee_ms"
                assert seat["timeouts"] == 0 and seat["strikes"] == 0, seats
                assert seat["time_bank_ms"] == 50, seats  # no bank draw
                assert seat["referee_ms"] >= 3 * 300, seats
            assert match.record.seat_stats[0].referee_ms == seats[0]["referee_ms"]
            assert not [n for n in match.record.notes if n.kind in ("timeout", "strike")]
            for bot in bots:
                await bot.close()

    run(scenario())


def test_a_request_the_transport_never_takes_is_charged_after_the_handoff_ceiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer never hands a request over (as when a bot stops reading and HTTP/2 flow
    control holds the writer): past MAX_HANDOFF_WAIT_S the clock runs anyway, so the seat
    times out, forfeits on strikes and the match ends, instead of standing still for ever."""
    monkeypatch.setattr(clock, "MAX_HANDOFF_WAIT_S", 0.2)

    async def scenario() -> None:
        async with serving(TimeControl(50, 0), SlowHandoff(3600.0)) as (referee, server):
            bots = [await connect(server, name, lean=True) for name in ("a", "b")]
            match = referee.create_match(["a", "b"], seed=3)
            assert match.task is not None
            await asyncio.wait_for(match.task, 30)
            assert match.record is not None
            assert list(match.record.forfeits) == [0, 1]
            for stats in match.record.seat_stats:
                assert stats.timeouts == 3 and stats.strikes == 3
                assert stats.referee_ms == 0  # never handed off: all of it is charged
            for bot in bots:
                await bot.close()

    run(scenario())


def test_a_stream_writer_that_fails_as_the_stream_ends_never_stops_the_detach() -> None:
    """A write in progress when a call dies fails (grpc's ExecuteBatchError). Waiting for that
    writer used to re-raise its error out of the handler's cleanup, which then never detached
    the stream: its seats' clocks never started and the match waited for ever (seen in CI)."""
    async def scenario() -> None:
        ending = asyncio.Event()

        async def writer() -> None:
            await ending.wait()
            raise RuntimeError("the call is over (as grpc's ExecuteBatchError says)")

        task = asyncio.ensure_future(writer())
        await asyncio.sleep(0)
        ending.set()
        await _let_writer_finish(task)  # returns; the handler's detach comes next
        assert task.done()

    run(scenario(), timeout=10)


class ThreadBot:
    """A prompt bot on a blocking grpc channel in its own thread: it answers while the
    referee's event loop is stalled, as a bot in another process would."""

    def __init__(self, address: str, token: str) -> None:
        self.outgoing: queue.Queue[arena_pb2.BotMessage | None] = queue.Queue()
        self.channel = grpc.insecure_channel(address)
        self.answered = 0
        message = hello("thread", max_matches=4)
        message.hello.lean = True
        self.outgoing.put(message)
        self.call = arena_pb2_grpc.ArenaStub(self.channel).Play(
            iter(self.outgoing.get, None), metadata=(("authorization", f"Bearer {token}"),))
        self.thread = threading.Thread(target=self._play, daemon=True)
        self.thread.start()

    def _play(self) -> None:
        with contextlib.suppress(grpc.RpcError):
            for message in self.call:
                if kind_of(message) in ("rotation_request", "decision_request"):
                    self.outgoing.put(legal_answer(message))
                    self.answered += 1

    def close(self) -> None:
        self.outgoing.put(None)
        self.call.cancel()
        self.channel.close()
        self.thread.join(5)


def test_time_an_answer_waits_for_a_stalled_referee_loop_is_never_charged_to_the_bot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As each request goes out, the referee's loop stalls 0.3 s (a blocking callback), longer
    than the decision time and the bank together; the bots answer at once from their own
    threads, so their answers wait, unread, for the loop. That wait is the referee's: no
    timeout, no bank draw, and the record counts it as the referee's time."""
    original = Seat.handed_off

    def stalling(seat: Seat, request_id: int) -> None:
        original(seat, request_id)
        asyncio.get_running_loop().call_soon(time.sleep, 0.3)

    monkeypatch.setattr(Seat, "handed_off", stalling)

    async def scenario() -> None:
        async with serving(TimeControl(100, 50)) as (referee, server):
            bots = [ThreadBot(server.address, TOKENS[name]) for name in ("a", "b")]
            try:
                while not all(referee.bots.get(n).connection for n in ("a", "b")):  # type: ignore[union-attr]
                    await asyncio.sleep(0.02)
                match = referee.create_match(["a", "b"], seed=5)
                while sum(bot.answered for bot in bots) < 8:
                    await asyncio.sleep(0.05)
                await referee.shutdown()
                assert match.record is not None
                seats = match.record.meta["seats"]
                assert isinstance(seats, list)
                for seat in seats:
                    assert seat["timeouts"] == 0 and seat["strikes"] == 0, seat
                    assert seat["time_bank_ms"] == 50, seat  # no bank draw
                    assert seat["referee_ms"] >= 2 * 250, seat
            finally:
                for bot in bots:
                    await asyncio.to_thread(bot.close)

    run(scenario())


# ----- what PROTOCOL.md now spells out ----------------------------------------------------------


def test_a_match_without_a_bank_is_asked_for_with_no_time_bank() -> None:
    async def scenario() -> None:
        async with serving() as (referee, server):
            bots = [await connect(server, name, lean=True) for name in ("a", "b")]
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = matches_pb2_grpc.MatchesStub(channel)
                info = await stub.CreateMatch(matches_pb2.CreateMatchRequest(
                    bots=["a", "b"], seed=1,
                    time_control=game_pb2.TimeControl(decision_ms=700, no_time_bank=True)))
                assert info.time_control == game_pb2.TimeControl(
                    decision_ms=700, time_bank_ms=0, no_time_bank=True)
                match = referee.matches.get(info.match_id)
                assert isinstance(match, MatchRunner)
                assert match.time_control == TimeControl(700, 0)
                start = await bots[0].expect("match_start", info.match_id)
                assert start.time_control.no_time_bank and start.time_bank_ms == 0
                # Zero still means the default, without the flag.
                info = await stub.CreateMatch(matches_pb2.CreateMatchRequest(
                    bots=["a", "b"], time_control=game_pb2.TimeControl(decision_ms=700)))
                assert info.time_control.time_bank_ms == 10_000
                assert not info.time_control.no_time_bank
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.CreateMatch(matches_pb2.CreateMatchRequest(
                        bots=["a", "b"], time_control=game_pb2.TimeControl(
                            time_bank_ms=500, no_time_bank=True)))
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "contradicts no_time_bank" in (refused.value.details() or "")
            for bot in bots:
                await bot.close()

    run(scenario())


def test_a_second_hello_is_bad_message_and_protocol_version_0_is_unsupported() -> None:
    async def scenario() -> None:
        async with serving() as (_, server):
            bot = await connect(server, "a", lean=False)
            await bot.send(hello("a"))
            error = await bot.expect("error", timeout=5)
            assert error.code == arena_pb2.ERROR_CODE_BAD_MESSAGE
            assert not bot.ended
            await bot.close()
            messages, code, details = await rejected(server.address, TOKENS["b"],
                                                     hello("b", protocol_version=0))
            assert [kind_of(m) for m in messages] == ["error"]
            assert messages[0].error.code == arena_pb2.ERROR_CODE_UNSUPPORTED_PROTOCOL
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert "protocol version 0 is not supported" in details

    run(scenario())
