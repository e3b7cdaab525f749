"""The referee as the apps see it (`RefereeFacade`): in process, no bot programs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from scout_arena.record import MatchRecord, load_record
from scout_arena.server import RefereeFacade, UnknownBot
from scout_rules import Phase
from scout_rules.protocol import TimeControl


@contextlib.asynccontextmanager
async def absent_pair_referee(records: Path) -> AsyncIterator[tuple[RefereeFacade,
                                                                    list[MatchRecord]]]:
    """A started referee for bots "a" and "b" (never connected), and the records it reports."""
    referee = RefereeFacade({"a": "token-a", "b": "token-b"}, records_dir=records,
                            time_control=TimeControl(50, 100))
    ended: list[MatchRecord] = []
    referee.on_match_finished(ended.append)
    await referee.start()
    try:
        yield referee, ended
    finally:
        await referee.stop()


async def until_ended(ended: list[MatchRecord]) -> None:
    for _ in range(300):
        if ended:
            return
        await asyncio.sleep(0.01)


def test_a_match_of_absent_bots_is_played_by_the_fallback_and_reported(tmp_path: Path) -> None:
    async def main() -> tuple[list[MatchRecord], str]:
        async with absent_pair_referee(tmp_path) as (referee, ended):
            assert referee.connected_bots() == {}
            with pytest.raises(UnknownBot, match="no bot named 'c'"):
                referee.create_match(["c", "a"])
            match_id = referee.create_match(["b", "a"], seed=7, absent_ok=True,
                                            meta={"key": "x"})
            live = referee.live_matches()
            assert [(m.match_id, list(m.players)) for m in live] == [(match_id, ["b", "a"])]
            view = live[0].spectator_view()
            assert view.phase is Phase.ROTATION and view.hand_sizes == (11, 11)
            await until_ended(ended)
            assert referee.live_matches() == []
        return ended, match_id

    ended, match_id = asyncio.run(main())
    [record] = ended
    assert record.match_id == match_id and record.status == "finished"
    assert record.players == ("b", "a") and record.forfeits == (0, 1)
    assert record.meta_value("key") == "x"
    assert load_record(tmp_path / f"{match_id}.json") == record


def test_a_match_whose_record_cannot_be_written_still_ends_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    records = tmp_path / "records"
    records.mkdir()

    async def main() -> tuple[list[MatchRecord], str, MatchRecord | None, float]:
        async with absent_pair_referee(records) as (referee, ended):
            records.rmdir()  # as a removed or unwritable records directory would
            match_id = referee.create_match(["a", "b"], seed=3, absent_ok=True)
            await until_ended(ended)
            assert referee.live_matches() == []
            kept = await referee._referee.find_record(match_id)
            url = referee.serve_metrics()
            page = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
            [failures] = [float(line.split()[1]) for line in page.decode().splitlines()
                          if line.startswith("scout_record_write_failures_total ")]
        return ended, match_id, kept, failures

    with caplog.at_level(logging.ERROR, logger="scout_arena.referee"):
        ended, match_id, kept, failures = asyncio.run(main())
    [record] = ended
    assert record.match_id == match_id and record.status == "finished"
    assert kept == record  # served from memory
    assert failures == 1
    assert f"match {match_id}: its record could not be written" in caplog.text
