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
from pathlib import Path

import grpc

from ..server.arena_service import ArenaServicer, FixedBot
from ..server.calls import ArenaContext
from ..server.connections import BotEntry
from ..server.listener import SERVER_OPTIONS
from ..server.referee import Referee

log = logging.getLogger("scout_arena.hosting")

SOCKET_OPTIONS = [option for option in SERVER_OPTIONS if option[0] != "grpc.so_reuseport"]
STREAMS_PER_SOCKET = 2
"""Play streams a hosted bot may have open at once (one, and a reconnect racing its end)."""


class HostedBotIdentity(FixedBot):
    """Every call on the socket is its bot's (`FixedBot`), and the first one is noted: whether
    the bot connected is part of its run's outcome."""

    refusal = "this socket serves one hosted bot only"

    def __init__(self, bot: BotEntry) -> None:
        super().__init__(bot)
        self.connected = False

    async def bot_for(self, context: ArenaContext) -> BotEntry | None:
        self.connected = True
        return self.bot


class BotSocket:
    """The server on one hosted run's socket, from `start` to `stop`: the Arena service alone
    (no health, reflection or liveness probe: nobody but the bot is there to ask)."""

    def __init__(self, referee: Referee, bot_name: str, path: Path) -> None:
        self.path = path
        self.identity = HostedBotIdentity(referee.bots.entry(bot_name))
        self._server = grpc.aio.server(options=SOCKET_OPTIONS)
        ArenaServicer(referee.streams, self.identity,
                      max_streams_per_token=STREAMS_PER_SOCKET).add_to_server(self._server)

    @property
    def connected(self) -> bool:
        return self.identity.connected

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self._server.add_insecure_port(f"unix:{self.path}") == 0:
            raise OSError(f"cannot listen on the Unix socket {self.path}")
        await self._server.start()

    async def stop(self, grace_s: float = 0.5) -> None:
        await self._server.stop(grace_s)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
