"""Hostile bots against a real referee process on 127.0.0.1: the arena the tests of
tests/test_referee_{timeouts_and_strikes,reconnects,hostile_streams}.py share.

The misbehaving bot is a raw grpc.aio client written with the generated stubs
(`support.rawbot.RawBot`); its opponents and every other seat are real `scout-arena bot run
greedy` processes. Each test checks that the offender gets a clear error, that nothing crashes,
that matches between other, well-behaved bots running on the same referee at the same time
finish normally (`SideMatches`), and that every record, the offender's match included, passes
`replay()`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import (
    RefereeProcess,
    admin_metadata,
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout.v1 import arena_pb2, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.record import replay
from scout_rules import IllegalAction
from scout_rules import Show as EngineShow
from scout_rules.moves import check_show

pytestmark = pytest.mark.timeout(120)


TOKENS = {"g1": "tok-g1", "g2": "tok-g2", "g3": "tok-g3", "raw": "tok-raw", "raw2": "tok-raw2"}


GREEDY = ("g1", "g2", "g3")


T = TypeVar("T")


def illegal_show(request: arena_pb2.DecisionRequest) -> tuple[game_pb2.Show, str]:
    """A Show inside the hand that is not listed as legal, and the engine's reason for
    rejecting it (checked against the engine: every unlisted group must really be illegal)."""
    faces = [c.face for c in request.observation.hand]
    active = [c.face for c in request.observation.active_set]
    listed = {(s.start, s.length) for s in request.legal_shows}
    for length in [*range(2, len(faces) + 1), 1]:
        for start in range(len(faces) - length + 1):
            if (start, length) in listed:
                continue
            try:
                check_show(faces, EngineShow(start, length), active)
            except IllegalAction as exc:
                return game_pb2.Show(start=start, length=length), str(exc)
            raise AssertionError(f"show {start}+{length} is legal but not in legal_shows")
    raise AssertionError(f"every group of hand {faces} is legal against {active}")


@dataclass
class Arena:
    referee: RefereeProcess
    stub: matches_pb2_grpc.MatchesStub

    async def create(
        self, bots: Sequence[str], seed: int, decision_ms: int = 0, time_bank_ms: int = 0
    ) -> str:
        info = await asyncio.to_thread(
            create_match, self.stub, bots, seed, decision_ms, time_bank_ms
        )
        return info.match_id

    async def finished(self, match_id: str, timeout: float = 30.0) -> matches_pb2.MatchInfo:
        info = await asyncio.to_thread(wait_finished, self.stub, match_id, timeout)
        assert info.status == matches_pb2.MATCH_STATUS_FINISHED, info
        return info

    async def info(self, match_id: str) -> matches_pb2.MatchInfo:
        info: matches_pb2.MatchInfo = await asyncio.to_thread(
            self.stub.GetMatch,
            matches_pb2.GetMatchRequest(match_id=match_id),
            metadata=admin_metadata(),
            timeout=5,
        )
        return info

    def record(self, match_id: str) -> dict[str, Any]:
        """The finished match's record, after checking that it replays."""
        record = fetch_record(self.stub, match_id)
        replay(record)
        assert record["finished"] is True
        return record


@contextlib.contextmanager
def arena(tmp_path: Path, *referee_args: str, decode_errors: bool = False) -> Iterator[Arena]:
    """A referee with every token of TOKENS and the greedy bots g1, g2, g3 connected; checked
    for health when the block ends."""
    with running_referee(tmp_path, TOKENS, *referee_args) as referee:
        for name in GREEDY:
            start_bot(referee, "greedy", TOKENS[name])
        wait_connected(referee, GREEDY)
        channel, stub = referee.matches_stub()
        try:
            yield Arena(referee, stub)
        finally:
            channel.close()
        assert_healthy(referee, decode_errors)


def assert_healthy(referee: RefereeProcess, decode_errors: bool = False) -> None:
    """The referee process is up, reports SERVING and logged no crash. With `decode_errors`,
    tracebacks of unparseable bot messages (logged by grpc itself) are tolerated."""
    assert referee.process.poll() is None, "the referee process died"
    with grpc.insecure_channel(referee.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "scout.v1.Arena"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING
    log = referee.log()
    assert "crashed" not in log, log
    tracebacks = log.count("Traceback")
    allowed = log.count("Unexpected [DecodeError] raised by servicer") if decode_errors else 0
    assert tracebacks <= allowed, log


class SideMatches:
    """Matches between g1 and g2, created one after another in a thread for as long as the
    `with` block runs: whatever a hostile bot does meanwhile, each must finish normally."""

    def __init__(self, arena: Arena, bots: Sequence[str] = ("g1", "g2")) -> None:
        self.arena = arena
        self.bots = list(bots)
        self.created: list[str] = []
        self.finished: list[matches_pb2.MatchInfo] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SideMatches:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        deadline = time.monotonic() + 30
        while not self.finished and self.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        channel, stub = self.arena.referee.matches_stub()
        try:
            seed = 9000
            while not self._stop.is_set():
                info = create_match(stub, self.bots, seed)
                self.created.append(info.match_id)
                seed += 1
                self.finished.append(wait_finished(stub, info.match_id, timeout=30))
                self._stop.wait(0.15)
        except BaseException as exc:  # reported by check()
            self.error = exc
        finally:
            channel.close()

    async def wait_more(self, timeout: float = 30.0) -> None:
        """Wait until a side match created from now on has finished."""
        wanted = len(self.created) + 1
        deadline = time.monotonic() + timeout
        while len(self.finished) < wanted:
            assert self.error is None, f"a side match failed: {self.error!r}"
            assert time.monotonic() < deadline, "no further side match finished"
            await asyncio.sleep(0.05)

    async def running_or_last(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while not self.created:
            assert self.error is None, f"a side match failed: {self.error!r}"
            assert time.monotonic() < deadline, "no side match was created"
            await asyncio.sleep(0.05)
        return self.created[-1]

    def check(self) -> None:
        assert self.error is None, f"a side match failed: {self.error!r}"
        assert self.finished, "no side match finished"
        for info in self.finished:
            assert info.status == matches_pb2.MATCH_STATUS_FINISHED, info
            assert not info.forfeited_seats, info
            record = self.arena.record(info.match_id)
            assert not record["notes"], record["notes"]
            assert all(seat["strikes"] == 0 for seat in record["meta"]["seats"])


@contextlib.contextmanager
def side_matches(arena: Arena) -> Iterator[SideMatches]:
    side = SideMatches(arena)
    with side:
        yield side
    side.check()


def run(scenario: Coroutine[Any, Any, T], timeout: float = 90.0) -> T:
    """Run a scenario; a hang fails it with a traceback instead of hitting pytest-timeout."""
    return asyncio.run(asyncio.wait_for(scenario, timeout))


def seat_notes(record: dict[str, Any], seat: int, strikes: bool = False) -> list[str]:
    """The kinds of a seat's notes, without the ``strike`` note that follows each strike's
    own note unless ``strikes``."""
    return [
        note["kind"]
        for note in record["notes"]
        if note["seat"] == seat and (strikes or note["kind"] != "strike")
    ]
