"""Trivial stand-ins for the hosting code's version validator, for the owners tests only.

The real one (hosting) runs each version in the sandbox; these decide at once, so that the
owner service and CLI can be tested without it.
"""

from __future__ import annotations

import asyncio
from typing import Any


class RecordingValidator:
    """Remembers what it was given and decides nothing."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, int]] = []
        self.unavailable = ""
        """Set it to say the validator cannot run (as a ladder without a sandbox)."""

    def submit(self, bot: str, version: int) -> None:
        self.submitted.append((bot, version))


class VerdictValidator(RecordingValidator):
    """Decides each version at once: rejected when its command mentions ``crash`` (with some
    output, as a bot that died would leave), active otherwise. Each decision also records a
    hosted run and writes a file in the bot's data folder, as the hosting code would."""

    def __init__(self, repo: Any) -> None:
        super().__init__()
        self.repo = repo
        self.tasks: set[asyncio.Task[None]] = set()

    def submit(self, bot: str, version: int) -> None:
        super().submit(bot, version)
        task = asyncio.get_running_loop().create_task(self._decide(bot, version))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _decide(self, bot: str, version: int) -> None:
        await asyncio.to_thread(self._decide_now, bot, version)

    def _decide_now(self, bot: str, version: int) -> None:
        info = self.repo.get_version(bot, version, as_owner=None)
        crash = any("crash" in part for part in info.command)
        output = "Traceback (most recent call last):\nRuntimeError: crash\n" if crash else "ok\n"
        self.repo.record_hosted_run(bot, f"validate-{bot}-{version}", version,
                                    "exited with status 1" if crash else "finished", output)
        data = self.repo.data_dir(bot)
        (data / "notes").mkdir(parents=True, exist_ok=True)
        (data / "notes" / f"v{version}.txt").write_text(f"version {version} was here\n")
        self.repo.finish_validation(bot, version, passed=not crash,
                                    reason="it exited before it connected" if crash else "",
                                    output=output)
