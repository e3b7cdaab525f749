"""The ladder's readiness check: its database answers (docs/deploy.md, "Probes").

A ladder whose database does not answer stores no result and starts no match: gRPC health
and /readyz say NOT_SERVING until it answers again, and SERVING then, by themselves. One ping
at a time: a ping that hangs (a network that drops packets) is not joined by another thread
each period; it is reported as not answering until it returns.
"""

from __future__ import annotations

import asyncio

from scout_arena.text import brief

from .repository import Repository

CHECK_S = 2.0
"""How often the ladder pings its database."""


class DatabaseCheck:
    """``await check()``: None when the database answered a ping, else why not."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._pending: asyncio.Future[None] | None = None

    async def __call__(self) -> str | None:
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(asyncio.to_thread(self.repo.ping))
        try:
            await asyncio.shield(self._pending)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"the database at {self.repo.url} does not answer ({brief(exc, 160)})"
        return None
