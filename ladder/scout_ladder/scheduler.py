"""The matchmaking loop: every ``schedule_interval_s`` (or when woken), the open challenges
whose bots are all idle, then tables of the other idle bots, handed to the `Placement`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from .config import LadderConfig
from .matchmaker import Candidate, choose_tables, unfillable_sizes, why_no_table
from .placement import Placement
from .ratingcache import RatingsCache
from .repository import Repository
from .roster import Roster
from .runtime import RunFlags

log = logging.getLogger("scout_ladder")

REFRESH_BOTS_S = 2.0
"""How often a scheduling pass reads the registered bots again."""


class Scheduler:
    """Chooses who plays whom, and warns when the bots there are cannot fill a table."""

    def __init__(self, repo: Repository, config: LadderConfig, roster: Roster,
                 ratings: RatingsCache, placement: Placement, flags: RunFlags,
                 rng: random.Random) -> None:
        self.repo = repo
        self.config = config
        self.roster = roster
        self.ratings = ratings
        self.placement = placement
        self.flags = flags
        self.rng = rng
        self._table_problem: tuple[str, float] | None = None
        self._table_warned: str | None = None

    async def run(self) -> None:
        """Scheduling passes until the ladder stops; a failed pass is logged and retried."""
        flags = self.flags
        last_refresh = 0.0
        while not flags.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(flags.wake.wait(), self.config.schedule_interval_s)
            flags.wake.clear()  # woken once per call: a wake-up is not a state
            if flags.stopping:
                return
            try:
                if time.monotonic() - last_refresh > REFRESH_BOTS_S:
                    await self.roster.refresh()
                    last_refresh = time.monotonic()
                self.check_tables()
                await self.schedule_once()
            except Exception:
                log.exception("scheduling pass failed; trying again")

    def _stopped_or_full(self) -> bool:
        return self.flags.stopping or self.placement.room() == 0

    async def schedule_once(self) -> None:
        if self.flags.paused:
            return
        placement = self.placement
        idle = dict.fromkeys(self.roster.idle(placement.held()))
        placement.notice_idle(len(idle))
        if not idle or placement.room() == 0:
            return
        for challenge in await asyncio.to_thread(self.repo.open_challenges):
            names = [challenge.bot, *challenge.opponents]
            if all(n in idle for n in names) and not self._stopped_or_full():
                await placement.begin(names, challenge_id=challenge.id)
                for n in names:
                    idle.pop(n, None)
        if not idle:
            return
        now = time.monotonic()
        stored = await asyncio.to_thread(self.repo.ratings)
        owners, idle_since = self.roster.owners, self.roster.idle_since
        candidates = []
        for name in idle:
            rating = self.ratings.get(name)
            games = stored[name].games if name in stored else 0
            candidates.append(Candidate(name, owners.get(name, ""), rating.mu, rating.sigma,
                                        games, now - idle_since.get(name, now)))
        # The whole pass's tables at once, off the loop (10,000 idle bots: about 0.5 s).
        rng = random.Random(self.rng.getrandbits(64))
        tables = await asyncio.to_thread(choose_tables, candidates, self.config.matchmaker,
                                         rng, placement.room())
        for count, table in enumerate(tables, 1):
            if self._stopped_or_full():
                return
            await placement.begin([c.name for c in table], challenge_id=None)
            if count % 100 == 0:
                await asyncio.sleep(0)  # a pass of thousands of tables lets the loop breathe

    def warn_about_registered_bots(self) -> None:
        """At start: the table sizes that the registered bots can never fill, and why."""
        roster = self.roster
        bots = {n: o for n, o in roster.owners.items()
                if roster.unschedulable.get(n) != "retired"}
        if not bots:
            return
        config = self.config.matchmaker
        why = why_no_table(bots, config)
        if why is not None:
            log.warning("no match can start even with every registered bot connected: %s",
                        why)
            return
        never = unfillable_sizes(bots, config)
        if never:
            owners = len(set(bots.values()))
            log.warning("tables of %s can never be formed: the %d registered bots belong to "
                        "%d owners and a table seats %s; only smaller tables are played",
                        ",".join(map(str, never)), len(bots), owners,
                        "any bots" if config.allow_same_owner else "one bot per owner")

    def check_tables(self) -> None:
        """Warns (once the situation has lasted a while) when the bots that can play cannot
        fill any allowed table, and says so again when they can."""
        connected = self.roster.schedulable(self.roster.free_seats())
        problem = why_no_table(connected, self.config.matchmaker) if connected else None
        now = time.monotonic()
        if problem is None:
            if self._table_warned is not None:
                log.warning("the connected bots can fill a table again: matches resume")
            self._table_problem = self._table_warned = None
            return
        if self._table_problem is None or self._table_problem[0] != problem:
            self._table_problem = (problem, now)
        since = self._table_problem[1]
        if problem != self._table_warned and now - since >= self.config.table_warning_after_s:
            log.warning("no match can start: the connected bots cannot fill any allowed table "
                        "size: %s", problem)
            self._table_warned = problem
