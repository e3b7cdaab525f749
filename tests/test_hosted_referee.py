"""Hosted seats on a referee (`scout_arena.hosting.Host`), with real sandboxed processes: a
hosted bot reaches its match only through its own socket, needs no token there, keeps its
data folder between matches, and whatever it does wrong costs only its own seat."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import grpc
from scout.v1 import arena_pb2, arena_pb2_grpc
from scout_arena.hosting import unpack_data
from scout_rules.protocol import TimeControl
from support.hosting import (
    hosted,
    hosted_referee,
    hosted_referee_and_remote,
    run_async,
    start_remote,
    stop_processes,
)
from support.rawbot import hello

FAST = TimeControl(decision_ms=1000, time_bank_ms=5000)


def _ticket() -> str:
    return secrets.token_urlsafe(16)


@run_async
async def test_a_hosted_bot_plays_through_its_socket_and_keeps_its_data(tmp_path: Path) -> None:
    async with hosted_referee_and_remote(tmp_path) as hr:
        data = b""
        for index in range(2):
            match_id = f"m-{index}"
            hr.expect(match_id, "counter")
            hr.referee.host_match(match_id, [("counter", _ticket()), ("remote", _ticket())],
                                  index, FAST, 30)
            await hr.host.start(match_id, [hosted("counter", "counter", tmp_path / str(index),
                                                  data=data)])
            match = await hr.finished(match_id)
            report = await hr.report(match_id, "counter")
            assert match.record is not None and match.record.status == "finished"
            assert match.record.outcome is not None and not match.record.outcome.forfeits
            assert report.connected and not report.failed, report
            assert f"run number {index + 1}" in report.outcome.output_tail
            assert report.data
            data = report.data
        unpack_data(data, tmp_path / "final")
        assert (tmp_path / "final" / "count").read_text() == "2"


@run_async
async def test_a_bot_crashing_at_start_forfeits_at_once_and_the_match_goes_on(
        tmp_path: Path) -> None:
    async with hosted_referee_and_remote(tmp_path) as hr:
        await hr.start_hosted("m-crash", "crasher", "crash_at_start", tmp_path, 1, FAST, 120)
        match = await hr.finished("m-crash", timeout=60)  # not the 120 s join deadline
        report = await hr.report("m-crash", "crasher")
        assert match.record is not None and match.record.outcome is not None
        assert match.record.status == "finished"
        assert match.record.outcome.forfeits == frozenset({0})
        assert report.failed and not report.connected
        assert "ZeroDivisionError on purpose" in report.outcome.output_tail
        assert "never connected" in report.why


@run_async
async def test_a_bot_dying_mid_match_forfeits_without_the_reconnect_grace(
        tmp_path: Path) -> None:
    async with hosted_referee_and_remote(tmp_path) as hr:
        await hr.start_hosted("m-dies", "dying", "crash_mid", tmp_path, 2, FAST, 30)
        match = await hr.finished("m-dies", timeout=25)  # the grace here is 30 s
        report = await hr.report("m-dies", "dying")
        assert match.record is not None and match.record.outcome is not None
        assert match.record.outcome.forfeits == frozenset({0})
        assert report.connected and report.ended_early and report.failed
        assert "dying mid-match" in report.outcome.output_tail


@run_async
async def test_a_bot_that_never_connects_forfeits_at_the_deadline_and_is_stopped(
        tmp_path: Path) -> None:
    async with hosted_referee_and_remote(tmp_path) as hr:
        await hr.start_hosted("m-sleep", "sleeper", "never_connects", tmp_path, 3, FAST, 2)
        match = await hr.finished("m-sleep")
        report = await hr.report("m-sleep", "sleeper")
        assert match.record is not None and match.record.outcome is not None
        assert match.record.outcome.forfeits == frozenset({0})
        assert not report.connected and report.failed and not report.ended_early
        assert "sleeping instead of connecting" in report.outcome.output_tail
        assert hr.host.running == 0


@run_async
async def test_a_run_cut_short_by_a_shutdown_before_it_connects_is_not_the_bots_failure(
        tmp_path: Path) -> None:
    async with hosted_referee(tmp_path) as hr:
        await hr.start_hosted("m-cut", "sleeper", "never_connects", tmp_path, 4, FAST, 30,
                              against="other")
        await hr.referee.shutdown(0)
        report = await hr.report("m-cut", "sleeper")
        assert not report.connected and report.interrupted and not report.failed
        assert hr.host.running == 0


@run_async
async def test_the_socket_is_the_bots_identity_whatever_token_is_sent(tmp_path: Path) -> None:
    """A client on a hosted run's socket is that bot, with any token or none (here: the
    never-connecting bot's socket, reached by the test itself)."""
    async with hosted_referee(tmp_path) as hr:
        hr.referee.host_match("m-sock", [("sleeper", _ticket()), ("other", _ticket())], 4,
                              FAST, 30)
        await hr.host.start("m-sock", [hosted("sleeper", "never_connects", tmp_path)])
        sockets = list(hr.host._sockets.glob("*/referee.sock"))
        assert len(sockets) == 1
        async with grpc.aio.insecure_channel(f"unix:{sockets[0]}") as channel:
            call = arena_pb2_grpc.ArenaStub(channel).Play(
                None, metadata=(("authorization", "Bearer not-a-token"),))
            await asyncio.wait_for(call.write(hello("anyone")), 30)
            welcome = await asyncio.wait_for(call.read(), 30)
            assert isinstance(welcome, arena_pb2.RefereeMessage)
            assert welcome.WhichOneof("body") == "welcome"
            assert welcome.welcome.bot_name == "sleeper"
            call.cancel()
        hr.referee.cancel_match("m-sock", "test over")
        hr.host.release("m-sock")
        await asyncio.sleep(0)


@run_async
async def test_a_hosted_bot_reaches_no_tcp_port_of_the_host(tmp_path: Path) -> None:
    """It tries the referee's own port (and another listening port) over TCP: no network in
    the sandbox, so both fail; it still plays its match through its socket."""
    async with hosted_referee(tmp_path, {"remote": "remote-token"}) as hr:
        listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        other = listener.sockets[0].getsockname()[1]
        remote = await start_remote(hr.server.address, "remote-token")
        try:
            probe = f"{hr.server.address} 127.0.0.1:{other}"
            await hr.start_hosted("m-probe", "prober", "tcp_probe", tmp_path, 5, FAST, 30,
                                  probe=probe)
            match = await hr.finished("m-probe")
            report = await hr.report("m-probe", "prober")
            tail = report.outcome.output_tail
            assert f"PROBE {hr.server.address}: refused" in tail, tail
            assert f"PROBE 127.0.0.1:{other}: refused" in tail, tail
            assert "CONNECTED" not in tail
            assert match.record is not None and match.record.outcome is not None
            assert not match.record.outcome.forfeits and not report.failed
        finally:
            listener.close()
            await stop_processes(remote)
