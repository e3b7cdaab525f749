"""A hosted bot's own Unix socket: the one way from its sandbox to the referee.

Each hosted run gets a small grpc.aio server of its own, listening only on a Unix socket in the
run's private directory, which the sandbox binds into the bot's view at
``/run/scout/referee.sock``. Whoever connects there *is* that bot: the socket, not a token,
says who it is (the ``SCOUT_TOKEN=hosted`` a bot sends is a placeholder and is ignored), so a
hosted bot holds no secret it could leak or use elsewhere. The server carries the Arena
service only: a hosted bot cannot create or watch matches.

One server per run rather than one per referee: grpc.aio binds its ports before it starts and
tells a servicer nothing about which of several Unix sockets a call came through; and a
server is cheap next to the sandboxed process it serves (measured here, 50 in a row on a busy
2-core machine: 2.1 ms to start, 1.7 ms to stop, ~10 KiB of resident memory each, against
~0.7 s and ~50 MB for a hosted Python bot to start and connect: bench/hosted.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from scout.v1 import arena_pb2

from ..server.referee import Referee
from ..server.service import SERVER_OPTIONS, ArenaServicer, add_arena_to_server

log = logging.getLogger("scout_arena.hosting")

Context = grpc.aio.ServicerContext[Any, Any]

SOCKET_OPTIONS = [option for option in SERVER_OPTIONS if option[0] != "grpc.so_reuseport"]
STREAMS_PER_SOCKET = 2
"""Play streams a hosted bot may have open at once (one, and a reconnect racing its end)."""


class BoundArenaServicer(ArenaServicer):
    """The Arena service of one bot: every call on its socket is that bot's."""

    def __init__(self, referee: Referee, bot_name: str) -> None:
        super().__init__(referee, STREAMS_PER_SOCKET)
        self.bot_name = bot_name
        self.connected = False
        """Set once the bot has opened a Play stream (for its run's outcome)."""

    async def Play(  # type: ignore[override]
        self, request_iterator: AsyncIterator[arena_pb2.BotMessage], context: Context
    ) -> None:
        bot = self.referee.bots.entry(self.bot_name)
        if bot.open_streams >= self.max_streams_per_token:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"this hosted bot already has {bot.open_streams} Play streams "
                                "open; it needs one")
        self.connected = True
        bot.open_streams += 1
        try:
            await self._play(bot, context)
        finally:
            bot.open_streams -= 1


class BotSocket:
    """The server on one hosted run's socket, from `start` to `stop`."""

    def __init__(self, referee: Referee, bot_name: str, path: Path) -> None:
        self.path = path
        self.servicer = BoundArenaServicer(referee, bot_name)
        self._server = grpc.aio.server(options=SOCKET_OPTIONS)
        add_arena_to_server(self.servicer, self._server)

    @property
    def connected(self) -> bool:
        return self.servicer.connected

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self._server.add_insecure_port(f"unix:{self.path}") == 0:
            raise OSError(f"cannot listen on the Unix socket {self.path}")
        await self._server.start()
        self.path.chmod(0o666)  # the sandbox's user is another uid in its namespace

    async def stop(self, grace_s: float = 0.5) -> None:
        await self._server.stop(grace_s)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
