"""The servers' event loop: uvloop where installed, stock asyncio on request or as the fallback,
and a referee that plays whole matches on either."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc
import pytest
from referee_support import (
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    wait_connected,
    wait_finished,
)
from scout.v1 import matches_pb2, matches_pb2_grpc
from scout_arena.record import replay
from scout_arena.server import eventloop
from scout_arena.server.eventloop import EventLoopUnavailable, loop_factory

TOKENS = {"north": "token-north", "south": "token-south"}


def _loop_module() -> str:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]
    return eventloop.run(which())


def test_stock_asyncio_by_default_and_uvloop_on_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV_VAR, raising=False)
    assert loop_factory()[1] == "asyncio"
    assert _loop_module() == "asyncio"
    assert loop_factory("auto")[1] == "uvloop"  # installed here
    monkeypatch.setenv(eventloop.ENV_VAR, "uvloop")
    assert loop_factory()[1] == "uvloop"
    assert _loop_module() == "uvloop"
    assert loop_factory("asyncio")[1] == "asyncio"  # a flag wins over the environment


def test_without_uvloop_auto_falls_back_and_asking_for_it_says_how_to_get_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV_VAR, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails
    assert loop_factory("auto")[1] == "asyncio"
    assert _loop_module() == "asyncio"
    with pytest.raises(EventLoopUnavailable, match="pip install uvloop"):
        loop_factory("uvloop")
    with pytest.raises(ValueError, match="not one of asyncio, uvloop, auto"):
        loop_factory("trio")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_referee_on_either_event_loop_plays_a_match_to_a_replayable_record(
        tmp_path: Path, loop: str) -> None:
    with running_referee(tmp_path, TOKENS, "--event-loop", loop) as referee:
        for token in TOKENS.values():
            start_bot(referee, "greedy", token)
        wait_connected(referee, list(TOKENS))
        assert f"event loop: {loop}" in referee.log()
        with grpc.insecure_channel(referee.address) as channel:
            stub = matches_pb2_grpc.MatchesStub(channel)
            info = create_match(stub, list(TOKENS), seed=11)
            final = wait_finished(stub, info.match_id)
            assert final.status == matches_pb2.MATCH_STATUS_FINISHED
            record = fetch_record(stub, info.match_id)
    assert record["notes"] == [] and record["forfeits"] == []
    assert replay(record).state.is_over
