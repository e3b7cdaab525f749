"""One ladder per database: the repository's lease, held from `acquire` to `release`, and
checked every ``lease_check_s`` while held. A lost lease asks the ladder to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .repository import Lease, LeaseLostError, Repository

log = logging.getLogger("scout_ladder")


class LeaseWatch:
    """Holds the ladder's lease and watches it."""

    def __init__(self, repo: Repository, check_s: float) -> None:
        self.repo = repo
        self.check_s = check_s
        self.stop_requested = asyncio.Event()
        """Set when the ladder must stop on its own (it lost its lease); see `failure`."""
        self.failure: str | None = None
        self._lease: Lease | None = None
        self._task: asyncio.Task[None] | None = None

    async def acquire(self) -> None:
        """Takes the lease: `LeaseHeldError` when another ladder serves the database."""
        self._lease = await asyncio.to_thread(self.repo.acquire_lease)

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="ladder lease watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            await asyncio.to_thread(lease.release)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.check_s)
            lease = self._lease
            if lease is None:
                return
            try:
                await asyncio.to_thread(lease.check)
            except LeaseLostError as exc:
                self.failure = (f"{exc}: stopping, so that no second ladder can serve the "
                                "database next to this one")
                log.critical("%s", self.failure)
                self.stop_requested.set()
                return
