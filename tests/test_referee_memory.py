"""The referee forgets what it no longer needs: finished matches are small summaries in a
bounded window, records live on disk, and nothing grows with the number of matches played.

Matches here are 2- to 4-player tables whose seats are all absent (the fallback plays every
move at once), driven through the `Referee` in process; the Matches service is asked over a
real `RefereeServer` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from scout.v1 import matches_pb2, matches_pb2_grpc
from scout_arena.record import load_record, record_to_json
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.book import KeptMatch, is_record_id
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.match import MatchRunner
from scout_rules.protocol import TimeControl

pytestmark = pytest.mark.timeout(120)

NAMES = ("a", "b", "c", "d")
TOKENS = {name: f"token-{name}" for name in NAMES}
QUICK = TimeControl(50, 0)


async def play(referee: Referee, count: int, players: int = 2) -> list[str]:
    """Play ``count`` matches of absent seats one after another; their ids, oldest first."""
    ids = []
    for n in range(count):
        runner = referee.create_match(NAMES[:players] if n % 2 else NAMES[:players][::-1],
                                      seed=n, absent_ok=True)
        ids.append(runner.match_id)
        assert runner.task is not None
        await runner.task
    return ids


def test_finished_matches_are_dropped_to_a_bounded_window_of_summaries(tmp_path: Path) -> None:
    keep_finished, played = 10, 60

    async def main() -> tuple[Referee, list[weakref.ref[MatchRunner]], list[str]]:
        referee = Referee(TOKENS, wire=ProtobufWire(), records_dir=tmp_path,
                          default_time_control=QUICK, keep_finished=keep_finished)
        runners: list[weakref.ref[MatchRunner]] = []
        referee.on_match_finished.append(lambda runner: runners.append(weakref.ref(runner)))
        ids = [*await play(referee, played // 2, 2), *await play(referee, played // 2, 4)]
        return referee, runners, ids

    referee, runners, ids = asyncio.run(main())
    gc.collect()
    assert len(runners) == played
    alive = [ref() for ref in runners if ref() is not None]
    assert alive == [], f"{len(alive)} finished runners (state, seats, spectator log) held"
    book = referee.matches
    assert book.running == {} and referee.running() == []
    assert len(book) == len(book.finished) == keep_finished
    assert list(book) == ids[-keep_finished:]  # the newest, oldest first
    assert all(isinstance(book[i], KeptMatch) for i in ids[-keep_finished:])
    assert ids[0] not in book
    assert book.records_held == 0  # with a records directory, records are read from disk
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(ids)


def test_without_a_records_directory_a_bounded_number_of_records_stays_in_memory() -> None:
    async def main() -> tuple[Referee, list[str]]:
        referee = Referee(TOKENS, wire=ProtobufWire(), default_time_control=QUICK,
                          keep_finished=8, keep_records=3)
        return referee, await play(referee, 20, 3)

    referee, ids = asyncio.run(main())
    book = referee.matches
    assert len(book.finished) == 8 and book.records_held == 3
    with_record = [i for i in ids if i in book and book[i].record is not None]
    assert with_record == ids[-3:]


def test_a_running_match_is_found_among_finished_ones_and_leaves_when_it_ends(
        tmp_path: Path) -> None:
    async def main() -> None:
        referee = Referee(TOKENS, wire=ProtobufWire(), records_dir=tmp_path,
                          default_time_control=QUICK, keep_finished=5)
        await play(referee, 7)
        runner = referee.create_match(["a", "b"], seed=1, absent_ok=True)
        assert referee.running() == [runner] and referee.matches[runner.match_id] is runner
        assert not referee._idle.is_set()
        assert runner.task is not None
        await runner.task
        assert referee.running() == [] and referee.matches.running == {}
        await asyncio.wait_for(referee.wait_idle(), 5)
        assert isinstance(referee.matches[runner.match_id], KeptMatch)

    asyncio.run(main())


# ----- the Matches service on finished and evicted matches -----------------------------------


@asynccontextmanager
async def served(records: Path | None, **keep: int
                 ) -> AsyncIterator[tuple[Referee, matches_pb2_grpc.MatchesAsyncStub]]:
    referee = Referee(TOKENS, wire=ProtobufWire(), records_dir=records,
                      default_time_control=QUICK, **keep)
    server = RefereeServer(referee)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            yield referee, matches_pb2_grpc.MatchesStub(channel)
    finally:
        await server.stop()


async def get_record(stub: matches_pb2_grpc.MatchesAsyncStub, match_id: str) -> dict[str, object]:
    reply = await stub.GetRecord(matches_pb2.GetRecordRequest(match_id=match_id), timeout=10)
    record: dict[str, object] = json.loads(reply.record_json)
    return record


def test_get_record_reads_an_evicted_match_from_disk(tmp_path: Path) -> None:
    async def main() -> None:
        async with served(tmp_path, keep_finished=2) as (referee, stub):
            ids = await play(referee, 5, 3)
            oldest = ids[0]
            assert oldest not in referee.matches  # neither runner nor summary is kept
            record = await get_record(stub, oldest)
            assert record == record_to_json(load_record(tmp_path / f"{oldest}.json"))
            assert record["match_id"] == oldest and record["finished"] is True
            # a match still in the window: its record comes from disk too (none in memory)
            assert (await get_record(stub, ids[-1]))["match_id"] == ids[-1]
            # an evicted match is no longer known to GetMatch, but its record is
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.GetMatch(matches_pb2.GetMatchRequest(match_id=oldest), timeout=10)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            for bad in ("m-nope", "../records", ".hidden", "a/b"):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await get_record(stub, bad)
                assert caught.value.code() == grpc.StatusCode.NOT_FOUND, bad

    asyncio.run(main())


def test_get_match_list_and_watch_answer_from_the_summary_of_a_finished_match(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with served(tmp_path, keep_finished=3) as (referee, stub):
            ids = await play(referee, 4, 4)
            newest = ids[-1]
            record = load_record(tmp_path / f"{newest}.json")
            info = await stub.GetMatch(matches_pb2.GetMatchRequest(match_id=newest),
                                       timeout=10)
            assert info.status == matches_pb2.MATCH_STATUS_FINISHED
            assert list(info.bots) == list(record.players)
            assert tuple(info.totals) == record.totals and tuple(info.ranks) == record.ranks
            assert tuple(info.forfeited_seats) == record.forfeits
            listed = await stub.ListMatches(matches_pb2.ListMatchesRequest(), timeout=10)
            assert [m.match_id for m in listed.matches] == ids[:0:-1]  # newest first, 3 kept
            events = [e async for e in stub.WatchMatch(
                matches_pb2.WatchMatchRequest(match_id=newest), timeout=10)]
            kinds = [e.WhichOneof("body") for e in events]
            assert kinds == ["match_info", "match_ended"]
            assert tuple(events[1].match_ended.ranks) == record.ranks

    asyncio.run(main())


def test_without_a_records_directory_get_record_says_an_old_record_is_no_longer_kept() -> None:
    async def main() -> None:
        async with served(None, keep_finished=6, keep_records=2) as (referee, stub):
            ids = await play(referee, 5)
            assert (await get_record(stub, ids[-1]))["match_id"] == ids[-1]
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await get_record(stub, ids[0])
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
            assert "no longer kept" in (caught.value.details() or "")

    asyncio.run(main())


def test_record_ids_are_file_names_and_nothing_else() -> None:
    assert is_record_id("m-0123456789ab")
    for bad in ("", ".", "..", "../x", "a/b", "a\\b", ".json", "x" * 129, "é", "a b", "a\x00"):
        assert not is_record_id(bad), bad
