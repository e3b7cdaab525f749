"""The turn gate (`turns`) and the completion drain (`cqdrain`): what keeps a busy referee's
event loop passes short and grpc's completions flowing, so calls that are not a match's
(CreateMatch, health) are not held up behind every match's turn."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any, cast

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from scout_arena.record import record_to_json
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.clock import SeatClock
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.events import MatchStatus
from scout_arena.server.hardening.cqdrain import (
    _drained,
    _pending_bytes,
    drain_completion_notifications,
)
from scout_arena.server.play import MatchPlay
from scout_arena.server.seat import Seat
from scout_arena.server.turns import TurnGate
from scout_rules.protocol import TimeControl
from support.rawbot import RawBot, legal_answer
from support.serving import served

TOKENS = {f"bot{i}": f"token-{i}" for i in range(12)}


class PassCounter:
    """Counts the event loop's passes: a callback that schedules itself for the next one."""

    def __init__(self) -> None:
        self.passes = 0
        self._running = True
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.passes += 1
        if self._running:
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._running = False


class StepClock:
    """A clock that moves ``step_s`` each time it is read: every turn seems to cost one step."""

    def __init__(self, step_s: float) -> None:
        self.now = 0.0
        self.step_s = step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


class TurnClock:
    """A clock that stands still but for the turns: each turn played moves it ``turn_s``."""

    def __init__(self, turn_s: float) -> None:
        self.now = 0.0
        self.turn_s = turn_s

    def __call__(self) -> float:
        return self.now

    def turn(self) -> None:
        self.now += self.turn_s


def turn(name: str, passes: PassCounter, played: list[tuple[str, int]],
         clock: TurnClock | None = None) -> Callable[[], None]:
    """A match turn as the referee has one (`Seat.take_turn`): the gate runs it."""
    def take() -> None:
        if clock is not None:
            clock.turn()
        played.append((name, passes.passes))
    return take


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("not reached in 10,000 passes")


def test_turns_past_the_pass_budget_wait_in_order_for_later_passes() -> None:
    async def scenario() -> tuple[list[tuple[str, int]], int]:
        clock = TurnClock(0.001)  # every turn costs 1 ms
        gate = TurnGate(budget_ms=2.5, clock=clock)
        passes = PassCounter()
        played: list[tuple[str, int]] = []
        for i in range(30):
            gate.wake(turn(f"t{i}", passes, played, clock))
        await until(lambda: len(played) == 30)
        passes.stop()
        return played, gate.deferred

    played, deferred = asyncio.run(scenario())
    assert [name for name, _ in played] == [f"t{i}" for i in range(30)]  # first come, first served
    per_pass: dict[int, int] = {}
    for _, at in played:
        per_pass[at] = per_pass.get(at, 0) + 1
    counts = [per_pass[at] for at in sorted(per_pass)]
    # Before it has measured a turn the gate assumes 0.3 ms: 8 fit in 2.5 ms. Then it learns
    # the turns' real cost, 1 ms, and lets fewer into each pass, down to the 2 that fit.
    assert counts[0] == 8
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] <= 3
    assert deferred == 30 - counts[0]  # every turn past the first pass waited


def test_a_gate_with_room_runs_a_turn_at_once_in_the_task_that_made_it_due() -> None:
    async def scenario() -> list[str]:
        gate = TurnGate(budget_ms=1.0, clock=StepClock(0.001))  # room for 3 (0.3 ms each)
        passes = PassCounter()
        played: list[tuple[str, int]] = []
        for i in range(4):
            gate.wake(turn(f"t{i}", passes, played))
        ran_at_once = [name for name, _ in played]
        assert gate.waiting == 1
        await until(lambda: len(played) == 4)  # a later pass runs the one that waited
        passes.stop()
        assert played[3][1] > played[0][1]
        return ran_at_once

    assert asyncio.run(scenario()) == ["t0", "t1", "t2"]


def test_a_turn_made_due_by_a_running_turn_waits_for_the_next_pass() -> None:
    """A turn never runs inside another (a strike's forfeit delivers to the seat whose turn
    is running): it is queued, in order, behind what waits already."""
    async def scenario() -> list[tuple[str, int]]:
        gate = TurnGate(budget_ms=2.0)
        passes = PassCounter()
        played: list[tuple[str, int]] = []
        inner = turn("inner", passes, played)

        def outer() -> None:
            gate.wake(inner)
            played.append(("outer", passes.passes))

        gate.wake(outer)
        assert [name for name, _ in played] == ["outer"]
        await until(lambda: len(played) == 2)
        passes.stop()
        return played

    played = asyncio.run(scenario())
    assert [name for name, _ in played] == ["outer", "inner"]
    assert played[1][1] > played[0][1]


def test_a_turn_that_raises_is_logged_and_the_turns_behind_it_still_run(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[str]:
        gate = TurnGate(budget_ms=0.3, clock=StepClock(0.001))  # room for 1 a pass
        passes = PassCounter()
        played: list[tuple[str, int]] = []

        def broken() -> None:
            raise RuntimeError("a broken turn")

        gate.wake(turn("first", passes, played))
        gate.wake(broken)  # waits, then raises inside a later pass's `_next_pass`
        gate.wake(turn("after", passes, played))
        await until(lambda: len(played) == 2)
        passes.stop()
        return [name for name, _ in played]

    assert asyncio.run(scenario()) == ["first", "after"]
    assert any("a match turn raised" in r.getMessage() and r.exc_info is not None
               for r in caplog.records)


def test_a_seat_turn_queued_before_its_match_ended_does_nothing() -> None:
    """A match ends (cancelled, or its last turn ran) while a seat's turn waits in the gate:
    nothing is open any more and the seat no longer has its match when the turn runs."""
    async def scenario() -> tuple[bool, list[Any]]:
        errors: list[Any] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(
            context))
        gate = TurnGate(budget_ms=0.3, clock=StepClock(0.001))  # room for 1 a pass
        match = SimpleNamespace(host=SimpleNamespace(turns=gate))
        seat = Seat(cast(Any, match), 0, cast(Any, None), SeatClock(1000, 1000.0))
        gate.wake(lambda: None)
        seat.open = cast(Any, object())
        seat.deliver(cast(Any, "an answer"))
        assert gate.waiting == 1
        seat.open = None
        del seat.match
        await until(lambda: gate.waiting == 0)
        return seat.turn_due, errors

    turn_due, errors = asyncio.run(scenario())
    assert not turn_due
    assert errors == []


def test_answers_and_a_timer_in_one_pass_make_one_turn_of_their_seat() -> None:
    """A seat's turn sees every answer delivered before it runs, so a seat is queued once;
    a seat with nothing open (its match ended) gets no turn."""
    async def scenario() -> list[list[object]]:
        gate = TurnGate(budget_ms=0.3, clock=StepClock(0.001))  # room for 1 a pass
        taken: list[list[object]] = []

        def answer_turn(seat: Seat) -> None:
            taken.append(list(seat.answers))
            seat.answers.clear()

        match = SimpleNamespace(host=SimpleNamespace(turns=gate),
                                asking=SimpleNamespace(answer_turn=answer_turn))
        seat = Seat(cast(Any, match), 0, cast(Any, None), SeatClock(1000, 1000.0))
        gate.wake(lambda: None)  # this pass's room is taken: the seat's turn has to wait
        seat.open = cast(Any, object())
        seat.deliver(cast(Any, "a"))
        seat.deliver(cast(Any, "b"))
        seat._timer_went_off()
        assert gate.waiting == 1
        await until(lambda: bool(taken))
        seat.open = None
        seat.deliver(cast(Any, "late"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert gate.waiting == 0
        return taken

    assert asyncio.run(scenario()) == [["a", "b"]]


async def crash_one_of_two(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, bool]:
    """Two matches of the same two bots; a turn of the first raises."""
    referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=TimeControl(5000, 30_000))
    async with served(referee) as server:
        bots = [(await RawBot.connect(server.address, TOKENS[name]))[0]
                for name in ("bot0", "bot1")]
        try:
            doomed = referee.create_match(["bot0", "bot1"], seed=7)
            healthy = referee.create_match(["bot1", "bot0"], seed=8)
            accept = MatchPlay._accept_action

            def failing(self: MatchPlay, answer: Any) -> Any:
                if self.match_id == doomed.match_id:
                    raise RuntimeError("a bug in a turn")
                return accept(self, answer)

            monkeypatch.setattr(MatchPlay, "_accept_action", failing)
            assert doomed.task is not None and healthy.task is not None
            doomed_task = doomed.task

            async def answer_doomed(bot: RawBot) -> None:
                while not doomed_task.done():
                    with contextlib.suppress(AssertionError):  # no request in 0.2 s
                        await bot.send(legal_answer(await bot.request(doomed.match_id, 0.2)))

            await asyncio.wait_for(asyncio.gather(
                *(answer_doomed(bot) for bot in bots),
                *(bot.play_to_end(healthy.match_id) for bot in bots)), 60)
            await asyncio.wait_for(healthy.task, 30)
            return doomed, healthy, any(bot.ended for bot in bots)
        finally:
            for bot in bots:
                await bot.close()


def test_a_turn_that_raises_aborts_its_match_and_the_bots_other_match_plays_on(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    doomed, healthy, stream_ended = asyncio.run(crash_one_of_two(monkeypatch))
    assert doomed.status is MatchStatus.ABORTED
    assert doomed.record is not None and doomed.record.meta is not None
    assert doomed.record.meta["status"] == "aborted"
    assert healthy.status is MatchStatus.FINISHED
    assert not stream_ended  # the turn ran in the reading task, which went on
    assert any("crashed" in r.getMessage() and r.exc_info is not None
               and "a bug in a turn" in str(r.exc_info[1]) for r in caplog.records)


def test_a_pass_budget_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="more than 0 ms"):
        TurnGate(budget_ms=0)


@contextlib.asynccontextmanager
async def serving(pass_budget_ms: float) -> AsyncIterator[tuple[Referee, RefereeServer]]:
    referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=TimeControl(5000, 30_000),
                      pass_budget_ms=pass_budget_ms)
    async with served(referee) as server:
        yield referee, server


async def play_tables(pass_budget_ms: float) -> tuple[list[Any], float]:
    """Three 4-player tables with fixed seeds, every bot answering at once; the records and
    how many turns had to wait for a later pass."""
    async with serving(pass_budget_ms) as (referee, server):
        bots = []
        for name, token in TOKENS.items():
            bot, _ = await RawBot.connect(server.address, token)
            bots.append((name, bot))
        try:
            tables = [bots[i:i + 4] for i in range(0, 12, 4)]
            runners = [referee.create_match([name for name, _ in table], seed=100 + i)
                       for i, table in enumerate(tables)]
            await asyncio.gather(*(bot.play_to_end(runner.match_id, timeout=60)
                                   for runner, table in zip(runners, tables, strict=True)
                                   for _, bot in table))
            for runner in runners:
                assert runner.task is not None
                await asyncio.wait_for(runner.task, 30)
            records = [record_to_json(runner.record) for runner in runners
                       if runner.record is not None]
            deferred = referee.metrics.registry.get_sample_value("scout_deferred_turns_total")
            return records, deferred or 0.0
        finally:
            for _, bot in bots:
                await bot.close()


def comparable(record: Any) -> Any:
    """A record without its match id and the referee's meta (times, clocks)."""
    return {key: value for key, value in record.items() if key not in ("match_id", "meta")}


def test_matches_whose_turns_wait_for_later_passes_play_exactly_as_without_a_limit() -> None:
    # A budget no turn fits in: one turn a pass, the others wait. A budget of a second: none do.
    gated, deferred = asyncio.run(asyncio.wait_for(play_tables(0.000_001), 180))
    free, free_deferred = asyncio.run(asyncio.wait_for(play_tables(1000), 180))
    assert len(gated) == len(free) == 3
    assert [comparable(r) for r in gated] == [comparable(r) for r in free]
    assert all(r["meta"]["status"] == "finished" for r in gated)
    assert deferred > 0  # three tables at once: turns did wait
    assert free_deferred == 0


def grpc_like_reader(sock: socket.socket, calls: list[int]) -> Any:
    """What grpc's reader does: one blocking recv(1), then it empties its queue."""
    def handle_events() -> None:
        calls.append(len(sock.recv(1)))
    return handle_events


def test_the_drain_takes_every_byte_but_one_and_then_runs_grpcs_reader() -> None:
    read_end, write_end = socket.socketpair()
    with read_end, write_end:
        calls: list[int] = []
        write_end.send(b"1" * 500)  # 500 completions came in since the last pass
        _drained(read_end, grpc_like_reader(read_end, calls))
        assert calls == [1]
        assert _pending_bytes(read_end) == 0  # the poller's next write finds room


def test_the_drain_never_runs_grpcs_reader_on_an_empty_socket() -> None:
    """grpc's recv(1) blocks on an empty socket: a spurious wake-up must not get there."""
    read_end, write_end = socket.socketpair()
    with read_end, write_end:
        calls: list[int] = []
        _drained(read_end, grpc_like_reader(read_end, calls))
        assert calls == []
        write_end.send(b"1")
        _drained(read_end, grpc_like_reader(read_end, calls))
        assert calls == [1]


def grpc_readers(loop: asyncio.AbstractEventLoop) -> list[Any]:
    return [key for key in loop._selector.get_map().values()  # type: ignore[attr-defined]
            if key.data[0] is not None
            and getattr(key.data[0]._callback, "_scout_drained", False)]


def test_wrapping_grpcs_reader_twice_wraps_it_once() -> None:
    async def scenario() -> int:
        server = grpc.aio.server()
        server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            loop = asyncio.get_running_loop()
            assert drain_completion_notifications(loop)
            assert drain_completion_notifications(loop)
            return len(grpc_readers(loop))
        finally:
            await server.stop(None)

    assert asyncio.run(scenario()) == 1


def test_a_referee_serves_health_checks_with_its_completion_reader_drained() -> None:
    async def scenario() -> int:
        async with serving(2.0) as (_, server):
            wrapped = grpc_readers(asyncio.get_running_loop())
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                for _ in range(50):
                    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                    assert reply.status == health_pb2.HealthCheckResponse.SERVING
            return len(wrapped)

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == 1


@pytest.mark.parametrize("budget", ["0", "-1", "abc", "5000"])
def test_referee_serve_refuses_a_pass_budget_it_cannot_keep(budget: str) -> None:
    done = subprocess.run([sys.executable, "-m", "scout_arena.cli", "referee", "serve",
                           "--port", "0", "--pass-budget-ms", budget],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--pass-budget-ms" in done.stderr
    assert "Traceback" not in done.stderr
