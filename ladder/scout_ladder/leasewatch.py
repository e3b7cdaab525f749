"""One ladder per database: the repository's lease, held from `acquire` to `release`, and
checked every ``lease_check_s`` while held.

A lease whose connection died (the database restarted, the network broke) is taken again as
soon as the database answers, for up to `REGAIN_S`: the ladder rides out a database restart,
not ready meanwhile (`dbhealth`). A lease another ladder took in between, or one not regained
in time, asks the ladder to stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .repository import Lease, LeaseHeldError, LeaseLostError, Repository

REGAIN_S = 120.0
"""How long a ladder whose lease connection died tries to take the lease again."""

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
                if await self._regain(lease, exc):
                    continue
                self.failure = (f"{exc}: stopping, so that no second ladder can serve the "
                                "database next to this one")
                log.critical("%s", self.failure)
                self.stop_requested.set()
                return

    async def _regain(self, lost: Lease, exc: LeaseLostError) -> bool:
        """Take the lease again after its connection died: True once held again; False when
        another ladder holds it or `REGAIN_S` passed."""
        log.error("%s; taking the lease again when the database answers (for %g s)", exc,
                  REGAIN_S)
        await asyncio.to_thread(lost.release)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REGAIN_S
        while loop.time() < deadline and self._lease is lost:
            try:
                lease = await asyncio.to_thread(self.repo.acquire_lease, 0.0)
            except LeaseHeldError as held:
                log.critical("the lease was taken by another ladder meanwhile: %s", held)
                return False
            except Exception:
                await asyncio.sleep(min(1.0, self.check_s))
                continue
            if self._lease is not lost:  # released meanwhile: the ladder is stopping
                await asyncio.to_thread(lease.release)
                return False
            self._lease = lease
            log.warning("the ladder holds its database lease again")
            return True
        return False
