"""The referee's server from start to stop: its services on a `Listener`, and a graceful stop.

`RefereeServer` serves a `Referee` to bots (Arena) and organisers (Matches) on one port, with
any services that share it (the ladder's). Stopping is graceful: health says NOT_SERVING,
running matches stop (their records written in full), every bot is told Goodbye and its
stream ends with OK, then the grpc server closes. `serve_forever` runs one until SIGINT or
SIGTERM, or until its grpc server is found dead (`liveness`), when it exits non-zero so that a
supervisor starts a healthy one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Sequence
from typing import NoReturn

from scout.v1 import arena_pb2, matches_pb2

from .arena_service import MAX_STREAMS_PER_TOKEN, ArenaServicer, BearerTokens, StreamWriter
from .events import Goodbye, GoodbyeReason
from .hardening import ServerLiveness
from .health import Health
from .limits import FdLimit, raise_fd_limit
from .listener import MAX_STREAMS_PER_CONNECTION, ExtraService, Listener, TlsConfig
from .matches_service import MatchesServicer, admin_token_problem
from .referee import Referee

log = logging.getLogger("scout_arena.referee")

GOODBYE_RETRY_AFTER_MS = 2000
"""How long a Goodbye{SHUTDOWN} asks bots to wait before they reconnect."""
GOODBYE_WAIT_S = 2.0
"""How long stopping waits for the streams told Goodbye to end before grpc cancels them."""
DEATH_DRAIN_S = 5.0
"""How long a referee whose grpc server died drains before it exits non-zero."""
DEATH_EXIT_STATUS = 3
LOW_CONNECTIONS = 1000
"""Fewer bot connections than this fit in the open-file limit: say so as a warning."""

ARENA = arena_pb2.DESCRIPTOR.services_by_name["Arena"].full_name
MATCHES = matches_pb2.DESCRIPTOR.services_by_name["Matches"].full_name


class RefereeServer:
    """A referee's Arena and Matches services (and ``extra_services``, which must register
    their methods, as the generated ``add_*Servicer_to_server`` do) on one `Listener`.

    ``stream_writer``: what drains each bot stream's outbox onto its call (`StreamWriter`);
    ``gc_policy``: apply the process's garbage-collection policy as the server starts (for
    ``referee serve``, which owns its process: `hardening`)."""

    def __init__(self, referee: Referee, *, host: str = "127.0.0.1", port: int = 0,
                 admin_token: str | None = None, tls: TlsConfig | None = None,
                 extra_services: Sequence[ExtraService] = (),
                 max_streams_per_connection: int = MAX_STREAMS_PER_CONNECTION,
                 max_streams_per_token: int = MAX_STREAMS_PER_TOKEN,
                 goodbye_retry_after_ms: int = GOODBYE_RETRY_AFTER_MS,
                 stream_writer: StreamWriter | None = None, gc_policy: bool = False) -> None:
        if admin_token is not None and (problem := admin_token_problem(admin_token)):
            raise ValueError(problem)
        self.referee = referee
        self.max_streams_per_connection = max_streams_per_connection
        self.goodbye_retry_after_ms = goodbye_retry_after_ms
        arena = ArenaServicer(referee.streams, BearerTokens(referee.authenticate),
                              max_streams_per_token=max_streams_per_token, writer=stream_writer)
        matches = MatchesServicer(referee, admin_token)
        self.listener = Listener(
            [(arena.add_to_server, ARENA), (matches.add_to_server, MATCHES), *extra_services],
            f"{host}:{port}", tls=tls, max_streams_per_connection=max_streams_per_connection,
            serving=(ARENA, MATCHES), gc_policy=gc_policy)
        self.server = self.listener.server
        self.port = self.listener.port
        self.address = self.listener.address
        self.liveness: ServerLiveness = self.listener.liveness
        self.health = Health(self.listener,
                             lambda: self.liveness.reason if self.liveness.dead else None)
        """Live and ready (`health`): gRPC health says SERVING only when ready."""
        self.fd_limit: FdLimit | None = None
        self._stopped = False

    async def start(self) -> None:
        self.fd_limit = raise_fd_limit()
        if self.fd_limit is not None:
            level = logging.WARNING if self.fd_limit.connections < LOW_CONNECTIONS \
                else logging.INFO
            log.log(level, "%s", self.fd_limit.describe())
        await self.listener.start()
        await self.health.start()

    def shutdown_goodbye(self) -> Goodbye:
        """The Goodbye of a referee that stops to come back (a restart, maintenance)."""
        return Goodbye(GoodbyeReason.SHUTDOWN, "the referee is shutting down; reconnect after "
                       f"{self.goodbye_retry_after_ms} ms", reconnect=True,
                       retry_after_ms=self.goodbye_retry_after_ms)

    async def stop(self, drain_s: float = 0.0, goodbye: Goodbye | None = None) -> None:
        """Graceful: report NOT_SERVING, stop matches (records written in full), tell every
        connected bot ``goodbye`` (default: `shutdown_goodbye`) and end its stream with OK,
        then close the server."""
        await self.liveness.stop()
        if self._stopped:
            return
        self._stopped = True
        await self.health.stop()
        await self.listener.report(serving=False)
        await self.referee.shutdown(drain_s)
        await self.referee.say_goodbye(goodbye or self.shutdown_goodbye(), GOODBYE_WAIT_S)
        await self.listener.stop(grace_s=1.0)


async def serve_forever(server: RefereeServer, drain_s: float = 0.0,
                        ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM, then shut down gracefully (bots are told Goodbye{SHUTDOWN}).
    If the grpc server dies meanwhile (`ServerLiveness`), drain for at most `DEATH_DRAIN_S`
    and raise SystemExit(3), so that a supervisor starts a healthy referee."""
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    reason = await wait_stopped_or_dead(stop, server.liveness)
    if reason is not None:
        await exit_dead(server.address, reason, server.stop(min(drain_s, DEATH_DRAIN_S)))
    log.info("shutting down")
    await server.stop(drain_s)


async def wait_stopped_or_dead(stop: asyncio.Event, liveness: ServerLiveness) -> str | None:
    """Wait until ``stop`` is set (returns None) or the server is found dead (its reason)."""
    stopped = asyncio.ensure_future(stop.wait())
    dead = asyncio.ensure_future(liveness.wait_dead())
    try:
        await asyncio.wait({stopped, dead}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (stopped, dead):
            task.cancel()
        await asyncio.gather(stopped, dead, return_exceptions=True)
    return liveness.reason if liveness.dead else None


async def exit_dead(address: str, reason: str, drain: Awaitable[None]) -> NoReturn:
    """After the grpc server died: run ``drain`` (bounded by DEATH_DRAIN_S plus the goodbye
    and grpc's grace), say so loudly and exit non-zero. The process is not to be trusted for
    long after grpc's crash, so nothing here waits without a bound."""
    log.critical("the referee's grpc server on %s is dead (%s); draining for at most %g s, "
                 "then exiting with status %d so that a supervisor restarts it",
                 address, reason, DEATH_DRAIN_S, DEATH_EXIT_STATUS)
    try:
        await asyncio.wait_for(drain, DEATH_DRAIN_S + GOODBYE_WAIT_S + 2.0)
    except Exception:
        log.exception("draining the dead referee failed")
    log.critical("exiting with status %d: the grpc server on %s died (%s)",
                 DEATH_EXIT_STATUS, address, reason)
    raise SystemExit(DEATH_EXIT_STATUS)
