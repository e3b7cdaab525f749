"""The web pages (`scout_arena.web`) served by the ladder process, in its own event loop.

The web package is imported only when the pages are served: a ladder without them needs
neither Starlette nor uvicorn loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from scout_arena.record import JSON

from .repository import Repository
from .submissions import Submissions

if TYPE_CHECKING:
    from scout_arena.web import EmbeddedServer, LiveMatch


class LadderWeb:
    """The pages over the ladder's repository, its live matches and its nodes' report, and
    the owner's page over its submissions (when given)."""

    def __init__(self, repo: Repository, host: str, port: int, *,
                 submissions: Submissions | None = None, admin_token: str | None = None) -> None:
        self.repo = repo
        self.submissions = submissions
        self.admin_token = admin_token
        self.host = host
        self.port = port
        self._server: EmbeddedServer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, live: Callable[[], Sequence[LiveMatch]],
                    nodes: Callable[[], Sequence[JSON]] | None) -> None:
        """Serve, and return once the server listens."""
        from scout_arena.web import create_app, make_server

        from .web_owners import LadderOwners
        from .web_source import LadderSource

        owners = None if self.submissions is None else LadderOwners(
            self.repo, self.submissions, self.admin_token)
        app = create_app(LadderSource(self.repo), title="Scout Arena ladder", live=live,
                         nodes=nodes, owners=owners)
        # Bound here, not by uvicorn: a port in use is an OSError to the caller, where uvicorn
        # would sys.exit() from inside the loop (a traceback, and a crash with grpc running).
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family)
        except socket.gaierror as exc:
            raise OSError(errno.EADDRNOTAVAIL, f"{exc.strerror}: {self.host!r}") from None
        server = self._server = make_server(app, self.host, self.port)
        task = self._task = asyncio.create_task(server.serve(sockets=[sock]), name="ladder web")
        while not server.started:
            if task.done():
                await task
                raise RuntimeError("the web server stopped while starting")
            await asyncio.sleep(0.01)

    @property
    def address(self) -> str | None:
        """host:port of the pages, once served."""
        return None if self._server is None else str(self._server.address)

    async def stop(self) -> None:
        if self._task is not None and self._server is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
