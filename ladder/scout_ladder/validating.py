"""The ladder's queue of versions to validate (the Owners service's `VersionValidator`): each
submitted version (and, at start, every version a previous run left ``validating``, which the
Owners service hands over again) is checked by `scout_arena.hosting.Validator`, one
at a time, and its verdict stored (`finish_validation`: ``active`` or ``rejected`` with the
reason and output). A version whose check is cut short by a stop stays ``validating`` and is
checked again at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scout_arena.hosting.validation import Validator, Verdict

log = logging.getLogger("scout_ladder.hosted")


class ValidationRepository(Protocol):
    def upload_path(self, name: str, version: int) -> Path: ...

    def finish_validation(self, name: str, version: int, *, passed: bool, reason: str,
                          output: str) -> object: ...


@dataclass(frozen=True)
class Decided:
    bot: str
    version: int
    verdict: Verdict


class ValidationQueue:
    """Checks queued versions in order, from `start` until `stop`."""

    def __init__(self, repo: ValidationRepository, validator: Validator) -> None:
        self.repo = repo
        self.validator = validator
        self._queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self._queued: set[tuple[str, int]] = set()
        self._waiters: dict[tuple[str, int], list[asyncio.Future[Decided]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.on_decided: list[asyncio.Event] = []
        """Set after each verdict (the scheduler refreshes its bots)."""

    async def start(self) -> None:
        """Start checking (the Owners service hands over the versions left validating)."""
        self._task = asyncio.create_task(self._work(), name="validate versions")

    def submit(self, bot: str, version: int) -> None:
        """Queue a ``validating`` version (again: a no-op while it is queued)."""
        key = (bot, version)
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def verdict(self, bot: str, version: int) -> Decided:
        """Wait for the verdict of a queued version."""
        future: asyncio.Future[Decided] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault((bot, version), []).append(future)
        return await future

    async def _work(self) -> None:
        while True:
            bot, version = await self._queue.get()
            try:
                decided = await self._check(bot, version)
            except Exception:
                log.exception("validation of %s version %d failed; it stays validating "
                               "until the next start", bot, version)
                continue
            finally:
                self._queued.discard((bot, version))
            for future in self._waiters.pop((bot, version), ()):
                if not future.done():
                    future.set_result(decided)
            for event in self.on_decided:
                event.set()

    async def _check(self, bot: str, version: int) -> Decided:
        path = await asyncio.to_thread(self.repo.upload_path, bot, version)
        archive = await asyncio.to_thread(path.read_bytes)
        log.info("validating %s version %d", bot, version)
        verdict = await self.validator.check(bot, archive)
        await asyncio.to_thread(self.repo.finish_validation, bot, version,
                                passed=verdict.passed, reason=verdict.reason,
                                output=verdict.output)
        log.info("%s version %d %s%s", bot, version,
                 "passed validation" if verdict.passed else "was rejected: ",
                 "" if verdict.passed else verdict.reason)
        return Decided(bot, version, verdict)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for futures in self._waiters.values():
            for future in futures:
                future.cancel()
