"""The ladder: its referee, its scheduler and its gRPC services, on one event loop.

`Ladder` only composes the jobs, each in a module of its own, and orders their start and
stop: `roster` (who the bots are, who can play), `scheduler` (the matchmaking loop),
`placement` (where a match is played: the ladder's own referee or a node), `flight` (a match's
intent, start and settle steps, and why nothing finished is lost), `node_events` (nodes that
attach, report and are lost), `probation`, `ratingcache`, `leasewatch`, `webserver`, and the
gRPC services (`ladder_api`, `owners_service`, the nodes' `nodes`) listed in
`Ladder.services`.

One ladder per database: `start` takes the repository's lease first and fails with
`LeaseHeldError` when another process holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence

from scout.v1 import nodes_pb2_grpc
from scout_arena.record import JSON
from scout_arena.server import RefereeFacade

from .config import LadderConfig, ProbationPolicy
from .dbhealth import CHECK_S as DB_CHECK_S
from .dbhealth import DatabaseCheck
from .flight import VOID_AT_START, VOID_AT_STOP, VOID_BEFORE_START, MatchFlights
from .hostedfiles import HostedFiles
from .hosting import HostingConfig, HostingPlacement, LadderHosting, RemoteOnly
from .ladder_api import ladder_service
from .leasewatch import LeaseWatch
from .node_events import NodeMatches
from .nodes import NodeRegistry, NodeSession, NodesServicer
from .owners_service import OwnersServicer, owners_service
from .placement import HOSTED_JOIN_TIMEOUT_S, LocalPlacement, NodePlacement, Placement
from .probation import Probation
from .ratingcache import RatingsCache
from .repository import Repository
from .roster import ConnectedBots, PlayerSource, Roster
from .rpc import ServiceRegistration
from .runtime import Background, RunFlags
from .scheduler import Scheduler
from .webserver import LadderWeb

__all__ = ["VOID_AT_START", "VOID_AT_STOP", "VOID_BEFORE_START", "Ladder", "LadderConfig",
           "ProbationPolicy"]

log = logging.getLogger("scout_ladder")


class Ladder:
    """Runs the ladder from `start` until `stop`."""

    def __init__(self, repository: Repository, config: LadderConfig) -> None:
        if config.node_token is not None and not config.node_token:
            raise ValueError("the node token is empty: give nodes a secret to attach with")
        self.repo = repository
        self.config = config
        self.flags = RunFlags()
        self.background = Background()
        self.services: list[ServiceRegistration] = [
            ladder_service(repository, config.admin_token)]
        """The gRPC services served beside the referee's own; a new one is one more entry,
        added here, before the referee is made (it registers them)."""
        self.hosting: LadderHosting | None = None
        if config.hosting:
            self.hosting = LadderHosting(
                repository, config.time_control, HostingConfig(
                    workdir=config.hosting_dir, data_limit_bytes=config.hosted_data_mb * 2**20,
                    join_timeout_s=max(config.join_timeout_s, HOSTED_JOIN_TIMEOUT_S)),
                on_nodes=config.node_token is not None)
        self.owners = OwnersServicer(repository, admin_token=config.admin_token,
                                     registration=config.registration,
                                     validator=config.version_validator or self.hosting)
        self.services.append(owners_service(self.owners))
        self.nodes: NodeRegistry | None = None
        if config.node_token is not None:
            self.nodes = NodeRegistry(config.node_heartbeat_s, config.node_heartbeat_timeout_s)
            files = None if self.hosting is None else HostedFiles(
                self.hosting.hosted, config.node_token, self._on_a_node)
            servicer = NodesServicer(self.nodes, self, config.node_token, files)
            self.services.append((lambda server: nodes_pb2_grpc.add_NodesServicer_to_server(
                servicer, server), "scout.v1.Nodes"))
        self.referee = RefereeFacade(
            host=config.host, port=config.port, admin_token=config.admin_token,
            time_control=config.time_control, reconnect_grace_s=config.reconnect_grace_s,
            authenticator=self._authenticate, extra_services=self.services, tls=config.tls)
        self.player_sources: list[PlayerSource] = [ConnectedBots(self.referee)]
        """Who can play now; a kind of bot that plays without a stream is one more entry."""
        if self.hosting is not None:
            self.hosting.bind(self.referee)
            self.player_sources[:] = [RemoteOnly(self.player_sources[0], self.hosting),
                                      self.hosting]
        self.roster = Roster(repository, self.player_sources)
        if self.hosting is not None:
            self.roster.on_refresh.append(self.hosting.refresh)
        self.ratings = RatingsCache()
        self.probation = Probation(repository, config.probation, self.roster, self.background,
                                   self.referee.send_probation)
        self.rng = random.Random(config.rng_seed)
        self.flights = MatchFlights(repository, self.referee, self.rng, self.flags,
                                    self.background, self.ratings, self.roster,
                                    self.probation)
        self.node_placement: NodePlacement | None = None
        self.node_matches: NodeMatches | None = None
        self.placement: Placement = LocalPlacement(self.flights)
        if self.nodes is not None:
            self._play_on_nodes(self.nodes)
        elif self.hosting is not None:
            self.placement = HostingPlacement(LocalPlacement(self.flights), self.hosting)
        self.scheduler = Scheduler(repository, config, self.roster, self.ratings,
                                   self.placement, self.flags, self.rng)
        self.lease = LeaseWatch(repository, config.lease_check_s)
        self.web = LadderWeb(repository, config.web_host, config.web_port or 0,
                             submissions=self.owners.submissions, admin_token=config.admin_token)
        self.voided_at_start: list[str] = []
        self.referee.on_match_finished(self.flights.match_finished)
        self.referee.on_connect(self._connected)
        self._scheduler_task: asyncio.Task[None] | None = None
        self._stopped = False

    def _play_on_nodes(self, nodes: NodeRegistry) -> None:
        """Every match on referee nodes, which attach to the `Nodes` service."""
        placement = self.node_placement = NodePlacement(
            nodes, self.flights, self.roster, self.referee, self.config, self.flags,
            self.background)
        self.node_matches = NodeMatches(self.repo, placement, self.flights, self.config,
                                        self.flags, self.background)
        if self.hosting is not None:
            hosting = self.hosting
            placement.node_filters.append(hosting.node_accepts)
            placement.hosted_seats = hosting
        self.placement = placement
        self.referee.add_gauge("scout_ladder_nodes", "Referee nodes attached now.",
                               lambda: float(len(nodes.nodes)))
        self.referee.add_gauge(
            "scout_ladder_node_matches", "Ladder matches assigned to nodes and not ended.",
            lambda: float(sum(len(n.matches) for n in list(nodes.nodes.values()))))

    # The `Nodes` servicer is made before the referee (which registers it), and the node
    # matches after it (they need it): its events reach them through here.

    def node_attached(self, node: NodeSession, running: Sequence[str],
                      previous: NodeSession | None) -> None:
        assert self.node_matches is not None
        self.node_matches.node_attached(node, running, previous)

    def node_lost(self, node: NodeSession, reason: str) -> None:
        assert self.node_matches is not None
        lost = list(node.matches)
        self.node_matches.node_lost(node, reason)
        if self.hosting is not None:
            for match_id in lost:
                self.hosting.node_match_over(match_id)

    async def node_match_ended(self, node: NodeSession, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        assert self.node_matches is not None
        try:
            return await self.node_matches.node_match_ended(node, match_id, record_json,
                                                            failure)
        finally:
            if self.hosting is not None:
                self.hosting.node_match_over(match_id)

    def _on_a_node(self, match_id: str) -> bool:
        """Whether a match is in flight on a node (the hosting calls serve only those)."""
        flight = self.flights.flights.get(match_id)
        return flight is not None and flight.node is not None

    @property
    def address(self) -> str:
        return self.referee.address

    @property
    def web_address(self) -> str | None:
        """host:port of the web pages, or None when they are not served."""
        return self.web.address

    @property
    def stop_requested(self) -> asyncio.Event:
        """Set when the ladder must stop on its own (it lost its lease); see `failure`."""
        return self.lease.stop_requested

    @property
    def failure(self) -> str | None:
        return self.lease.failure

    def node_report(self) -> list[JSON]:
        """The attached nodes and their load, for the web pages and the CLI."""
        return [] if self.node_placement is None else self.node_placement.node_report()

    def pause(self) -> None:
        """Start no more matches (before the ladder's local nodes are stopped, `stop`)."""
        self.flags.paused = True

    async def _authenticate(self, token: str) -> str | None:
        return await self.roster.authenticate(token)

    def _connected(self, name: str) -> None:
        """Right after the bot's Welcome: its matches on nodes, and its probation."""
        self.roster.connected(name)
        if self.node_placement is not None:
            self.flights.resend_assignments(name, self.node_placement.held().get(name, ()))
        self.probation.bot_connected(name)

    async def start(self) -> None:
        """Takes the lease (`LeaseHeldError` if another ladder serves the database), migrates,
        voids what a dead predecessor left in flight, and starts serving."""
        await self.lease.acquire()
        referee_started = False
        try:
            await asyncio.to_thread(self.repo.migrate)
            if self.node_matches is not None:
                self.voided_at_start = self.node_matches.voided_at_start
                await self.node_matches.await_claims()
            else:
                self.voided_at_start = await asyncio.to_thread(self.repo.void_in_flight,
                                                               VOID_AT_START)
            if self.voided_at_start:
                log.warning("voided %d matches that were in flight when the ladder died: %s",
                            len(self.voided_at_start), ", ".join(self.voided_at_start))
            self.ratings.load(await asyncio.to_thread(self.repo.ratings))
            await self.roster.refresh()
            self.scheduler.warn_about_registered_bots()
            await self.referee.start()
            referee_started = True
            if self.hosting is not None:
                await self.hosting.start()
            await self.owners.resume_validations()
            if self.config.web_port is not None:
                await self.web.start(self.referee.live_matches,
                                     self.node_report if self.nodes is not None else None)
        except BaseException:
            if referee_started:
                with contextlib.suppress(Exception):
                    await self.referee.stop()
            await self.lease.release()
            raise
        self._scheduler_task = asyncio.create_task(self.scheduler.run(),
                                                   name="ladder scheduler")
        self.lease.start()
        self.referee.watch_health("database", DatabaseCheck(self.repo), DB_CHECK_S)

    async def stop(self) -> None:
        """Stops cleanly: no new match, running ones aborted and voided, every result and void
        stored (retrying while the database fails), then the lease released."""
        if self._stopped:
            return
        self.flags.stopping = True
        if self.nodes is not None:
            self.nodes.stopping = True
        self.flags.wake.set()
        await self.lease.stop()
        if self._scheduler_task is not None:
            # Not cancelled: a pass ends between two matches, never between a match's row
            # and its start.
            with contextlib.suppress(Exception):
                await self._scheduler_task
        try:
            await self.web.stop()
            try:
                await self.referee.stop()
            except Exception:
                log.exception("the referee did not stop cleanly")
            if self.hosting is not None:
                await self.hosting.stop()  # stops hosted bots; their runs are stored
            await self.background.drain()
            await self.flights.settle_at_stop()
            await self.background.drain()
        finally:
            await self.lease.release()
        self._stopped = True
