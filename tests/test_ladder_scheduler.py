"""The ladder's scheduler between its passes: it waits for its interval or a wake-up call."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Set
from pathlib import Path

from scout_ladder.config import LadderConfig
from scout_ladder.ratingcache import RatingsCache
from scout_ladder.repository import Repository
from scout_ladder.roster import Roster
from scout_ladder.runtime import RunFlags
from scout_ladder.scheduler import Scheduler


class CountingPlacement:
    """Places nothing; counts the scheduling passes (each tells it of the idle bots)."""

    def __init__(self) -> None:
        self.passes = 0

    def room(self) -> int | None:
        return None

    def held(self) -> Mapping[str, Set[str]]:
        return {}

    def notice_idle(self, idle: int) -> None:
        self.passes += 1

    async def begin(self, names: list[str], challenge_id: int | None) -> None:
        raise AssertionError("no bot can play: no table is begun")


def test_a_wake_up_call_runs_one_pass_and_the_scheduler_waits_again(tmp_path: Path) -> None:
    """A node's freed seat wakes the scheduler for one pass, not for every pass after it
    (which would be a loop of passes over every connected bot, for ever)."""
    repo = Repository(f"sqlite:///{tmp_path / 'ladder.db'}")
    repo.migrate()
    interval_s, watched_s = 0.1, 1.0

    async def scenario() -> int:
        flags = RunFlags()
        placement = CountingPlacement()
        scheduler = Scheduler(repo, LadderConfig(schedule_interval_s=interval_s),
                              Roster(repo, []), RatingsCache(), placement, flags,
                              random.Random(1))
        task = asyncio.create_task(scheduler.run())
        flags.wake.set()
        await asyncio.sleep(watched_s)
        flags.stopping = True
        flags.wake.set()
        await task
        return placement.passes

    passes = asyncio.run(scenario())
    repo.close()
    # One pass per interval at most, plus the woken one (a machine under load runs fewer).
    assert 1 <= passes <= watched_s / interval_s + 2, passes
