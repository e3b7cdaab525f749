"""A match that is over stays over: its record is written and it is reported finished even
when the referee cancels it (a shutdown, a stopped tournament) while the record is being
written. Matches here have every seat absent (the fallback plays every move at once), driven
through the `Referee` in process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from scout_arena.record import MatchRecord, load_record, write_record_bytes
from scout_arena.server import Referee
from scout_arena.server import records as records_module
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.events import MatchStatus
from scout_arena.server.match import MatchRunner
from scout_rules.protocol import TimeControl

pytestmark = pytest.mark.timeout(120)

TOKENS = {name: f"token-{name}" for name in ("a", "b", "c")}


def slow_write(seconds: float) -> Any:
    real = write_record_bytes

    def write(data: bytes, path: Path) -> None:
        time.sleep(seconds)
        real(data, path)

    return write


def started_match(records_dir: Path) -> tuple[Referee, Any, asyncio.Task[None],
                                              list[MatchRecord]]:
    """A referee with one match of absent seats just created (its task not yet begun), and
    the records the referee reports as its matches end."""
    referee = Referee(TOKENS, wire=ProtobufWire(), records_dir=records_dir,
                      default_time_control=TimeControl(50, 0))
    reported: list[MatchRecord] = []

    def report(match: MatchRunner) -> None:
        assert match.record is not None, "a match is stored before it is reported finished"
        reported.append(match.record)

    referee.on_match_finished.append(report)
    runner = referee.create_match(["a", "b", "c"], seed=3, absent_ok=True)
    assert runner.task is not None
    return referee, runner, runner.task, reported


@pytest.mark.parametrize("write_s", [0.3, 2.0])
def test_a_match_cancelled_while_its_record_is_written_ends_finished_once_it_is_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_s: float) -> None:
    monkeypatch.setattr(records_module, "write_record_bytes", slow_write(write_s))
    monkeypatch.setattr("scout_arena.server.match.STORE_AFTER_CANCEL_S", 1.0)

    async def main() -> tuple[Any, list[MatchRecord], bool, bool]:
        referee, runner, task, reported = started_match(tmp_path)
        while runner.record is None:  # played to the end: the record is being written
            await asyncio.sleep(0.01)
        assert runner.status is MatchStatus.RUNNING
        assert referee.cancel_match(runner.match_id, "a test")
        with pytest.raises(asyncio.CancelledError):
            await task
        return runner, reported, (tmp_path / f"{runner.match_id}.json").exists(), \
            runner.record_stored

    runner, reported, on_disk, stored = asyncio.run(main())
    if write_s < 1.0:  # written within the wait: finished, on disk, reported
        assert runner.status is MatchStatus.FINISHED and on_disk and stored
        assert [r.match_id for r in reported] == [runner.match_id]
        assert reported[0].status == "finished"
        assert load_record(tmp_path / f"{runner.match_id}.json").finished
    else:  # a write that hangs is given up on: the match ends, its record only in memory
        assert runner.status is MatchStatus.FINISHED and not on_disk and not stored
        assert [r.match_id for r in reported] == [runner.match_id]


@pytest.mark.parametrize("stop", ["cancel_match", "shutdown"])
def test_a_match_cancelled_before_its_task_first_runs_is_aborted_with_its_record(
        tmp_path: Path, stop: str) -> None:
    """A stop that comes in the same step as the match's creation (a tournament stopped as it
    starts one, a ladder's cancel read with the bots' joins) still ends the match."""

    async def main() -> tuple[Any, list[MatchRecord], bool]:
        referee, runner, task, reported = started_match(tmp_path)
        if stop == "shutdown":
            await referee.shutdown()
            assert task.cancelled()
        else:
            assert referee.cancel_match(runner.match_id, "a test")
            with pytest.raises(asyncio.CancelledError):
                await task
        return runner, reported, not referee.running()

    runner, reported, idle = asyncio.run(main())
    assert runner.status is MatchStatus.ABORTED and idle
    assert [r.status for r in reported] == ["aborted"]
    assert load_record(tmp_path / f"{runner.match_id}.json").status == "aborted"
