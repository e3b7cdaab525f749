"""A real in-process referee server for tests that drive it with raw bots."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from scout_arena.server import Referee, RefereeServer


@contextlib.asynccontextmanager
async def served(referee: Referee, **server_options: Any) -> AsyncIterator[RefereeServer]:
    """``referee`` served on a free loopback port until the block ends."""
    server = RefereeServer(referee, **server_options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
