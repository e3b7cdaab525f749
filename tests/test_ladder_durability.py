"""Nothing finished is ever lost: the ladder in this process (its real referee on loopback),
real bot processes, and a repository that is slow or fails on purpose. Both backends.

* a match can end long before its row would have been written: the row is written first;
* a finish whose commit went through but whose answer was lost is retried, and is a no-op;
* a finish failing for a transient database error is retried (logged, with backoff), a stop
  waits for it, and no task exception goes unretrieved.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scout_arena.record import MatchRecord
from scout_ladder.matchmaker import MatchmakerConfig
from scout_ladder.recompute import check
from scout_ladder.repository import Repository
from scout_ladder.service import VOID_AT_STOP, VOID_BEFORE_START, Ladder, LadderConfig
from scout_rules.protocol import TimeControl
from sqlalchemy.exc import OperationalError

CLI = [sys.executable, "-m", "scout_arena.cli"]
pytestmark = pytest.mark.timeout(600)


def start_bots(address: str, tokens: dict[str, str], logs: Path) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen([*CLI, "bot", "run", "random", "--seed", str(i)],
                         env={**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token},
                         stdout=subprocess.DEVNULL, stderr=(logs / f"{name}.log").open("a"),
                         text=True)
        for i, (name, token) in enumerate(tokens.items())
    ]


def stop_bots(bots: list[subprocess.Popen[str]]) -> None:
    for bot in bots:
        bot.terminate()
    for bot in bots:
        try:
            bot.wait(30)
        except subprocess.TimeoutExpired:
            bot.kill()


async def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.1)


def ladder_config() -> LadderConfig:
    return LadderConfig(port=0, matchmaker=MatchmakerConfig(table_sizes=(2,)),
                        time_control=TimeControl(2000, 20_000), rng_seed=3)


def assert_nothing_lost(repo: Repository, finished_by_referee: list[MatchRecord]) -> None:
    """Every match the referee finished is stored finished, rated once; nothing is left in
    flight; every void says it was the stop; the stored ratings are the recomputed ones."""
    stored = {m.match_id: m for m in repo.list_matches(limit=100_000)}
    missing = [r.match_id for r in finished_by_referee
               if r.match_id not in stored or stored[r.match_id].status != "finished"]
    assert missing == [], f"finished by the referee, not stored as finished: {missing}"
    assert [m for m in stored.values() if m.status == "in_flight"] == []
    # A stop voids what it aborted, and a row it wrote but never started (a slow write).
    assert {m.void_reason for m in stored.values() if m.status == "void"} <= {
        VOID_AT_STOP, VOID_BEFORE_START}
    games = Counter(s.bot for m in stored.values() if m.status == "finished" and m.rated
                    for s in m.seats)
    assert {name: r.games for name, r in repo.ratings().items()} == dict(games)
    report = check(repo.rating_snapshot())
    assert report.differences == () and report.matches == sum(
        1 for m in stored.values() if m.status == "finished" and m.rated)


class SlowStarts(Repository):
    """Writing a match's row takes longer than playing it."""

    def start_match(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(3.0)
        return super().start_match(*args, **kwargs)


def test_a_match_that_ends_before_its_row_would_be_written_is_kept(
        ladder_url: str, tmp_path: Path) -> None:
    repo = SlowStarts(ladder_url)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in ("a", "b")}
    seen: list[MatchRecord] = []

    async def scenario() -> None:
        ladder = Ladder(repo, ladder_config())
        ladder.referee.on_match_finished(
            lambda record: seen.append(record) if record.status == "finished" else None)
        await ladder.start()
        bots = start_bots(ladder.address, tokens, tmp_path)
        try:
            await wait_until(lambda: len(seen) >= 3, 300, "3 finished matches")
        finally:
            await ladder.stop()
            stop_bots(bots)

    asyncio.run(scenario())
    assert_nothing_lost(repo, seen)
    repo.close()


class Flaky(Repository):
    """Every match's first finish commits and then loses its answer (the connection drops as
    the commit is acknowledged); during an outage every finish fails before it writes."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.outage = threading.Event()
        self.failed_in_outage = 0
        self.calls: Counter[str] = Counter()

    def finish_match(self, match_id: str, *args: Any) -> Any:
        self.calls[match_id] += 1
        lost = OperationalError("COMMIT", {}, Exception("server closed the connection"))
        if self.outage.is_set():
            self.failed_in_outage += 1
            raise lost
        result = super().finish_match(match_id, *args)
        if self.calls[match_id] == 1:
            raise lost
        return result


def test_finishes_that_fail_for_a_transient_error_are_retried_and_the_stop_waits_for_them(
        ladder_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = Flaky(ladder_url)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in ("a", "b", "c")}
    seen: list[MatchRecord] = []
    loop_errors: list[dict[str, Any]] = []

    def stored_finished() -> int:
        return len(repo.list_matches(limit=100_000, status="finished"))

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: loop_errors.append(ctx))
        ladder = Ladder(repo, ladder_config())
        ladder.referee.on_match_finished(
            lambda record: seen.append(record) if record.status == "finished" else None)
        await ladder.start()
        bots = start_bots(ladder.address, tokens, tmp_path)
        try:
            await wait_until(lambda: stored_finished() >= 3, 300, "3 stored matches")
            repo.outage.set()
            await wait_until(lambda: repo.failed_in_outage >= 1, 300, "a finish in the outage")
        finally:
            stopping = asyncio.ensure_future(ladder.stop())
            await asyncio.sleep(1.0)
            # A result is waiting to be stored: the stop waits for it.
            still_waiting = not stopping.done()
            repo.outage.clear()
            await asyncio.wait_for(stopping, 300)
            stop_bots(bots)
        assert still_waiting

    asyncio.run(scenario())
    assert_nothing_lost(repo, seen)
    assert loop_errors == []
    retries = [r for r in caplog.records if "failed (attempt" in r.getMessage()]
    assert retries and all(r.levelname == "WARNING" for r in retries)
    repo.close()
