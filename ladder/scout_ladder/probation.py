"""Probation: a bot whose recent matches are mostly forfeits or timeouts is not scheduled
until it reconnects (a fresh process is presumed fixed) or an owner lifts it. The bot is told
on its stream (`Probation` messages, PROTOCOL.md §3.9) when it starts and when it ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .config import ProbationPolicy
from .repository import Repository
from .roster import Roster
from .runtime import Background

log = logging.getLogger("scout_ladder")


class Probation:
    """Puts bots on probation after a bad match and lifts it when they reconnect."""

    def __init__(self, repo: Repository, policy: ProbationPolicy, roster: Roster,
                 background: Background,
                 tell: Callable[[str, bool, str], object] = lambda name, active, why: None
                 ) -> None:
        self.repo = repo
        self.tell = tell
        """tell(bot, active, reason): says it on the bot's stream, if it has one."""
        self.policy = policy
        self.roster = roster
        self.background = background

    async def check(self, name: str) -> None:
        """After a bad seat of ``name``: on probation if its recent matches say so."""
        policy = self.policy
        recent = await asyncio.to_thread(self.repo.recent_seat_results, name, policy.window)
        if len(recent) < policy.min_matches:
            return
        bad = sum(1 for r in recent if r.forfeited or r.timeouts > 0)
        unschedulable = self.roster.unschedulable
        if bad / len(recent) >= policy.max_bad_share and name not in unschedulable:
            reason = (f"{bad} of its last {len(recent)} matches had timeouts or forfeits; "
                      "it is scheduled again once it reconnects")
            unschedulable[name] = f"probation: {reason}"
            await asyncio.to_thread(self.repo.set_probation, name, reason)
            log.warning("bot %s on probation: %s", name, reason)
            self.tell(name, True, reason)

    def bot_connected(self, name: str) -> None:
        unschedulable = self.roster.unschedulable
        if name in unschedulable and unschedulable[name].startswith("probation"):
            why = unschedulable.pop(name).removeprefix("probation: ")
            self.tell(name, False, f"lifted: the bot reconnected (it was on probation: {why})")
            self.background.spawn(self._lift(name), f"lift the probation of {name}")

    async def _lift(self, name: str) -> None:
        await asyncio.to_thread(self.repo.set_probation, name, None)
        log.info("bot %s reconnected: probation lifted", name)
