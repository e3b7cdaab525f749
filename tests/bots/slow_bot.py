"""A bot that thinks for a long time before every turn (for the referee's shutdown tests).

Its rotation choice is instant; every `act` waits SLOW_BOT_DELAY_S seconds (default 30) and
then plays what the bundled greedy bot would. `act` is async, so stopping the process cancels
the wait at once instead of waiting for a sleeping worker thread.
"""

from __future__ import annotations

import asyncio
import os

from scout_client import Action, Bot, GreedyBot, Observation


class SlowBot(Bot):
    name = "slow"
    version = "1"

    def __init__(self) -> None:
        self.delay_s = float(os.environ.get("SLOW_BOT_DELAY_S", "30"))
        self._greedy = GreedyBot()

    async def act(self, observation: Observation) -> Action:
        await asyncio.sleep(self.delay_s)
        return self._greedy.act(observation)
