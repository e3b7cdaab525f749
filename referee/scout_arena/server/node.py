"""A referee serving as a node of a ladder (``referee serve --join LADDER``).

The node keeps one `Nodes.Attach` stream to its ladder (nodes.proto): it registers (address,
capacity, version, and the ladder matches it is playing, so that after a lost link the ladder
can cancel those it voided meanwhile), sends a heartbeat every ``heartbeat_ms``, holds each
match the ladder assigns (`Referee.host_match`: its bots come with tickets) and reports each
one that ends with its record. The ladder stays the one writer of its database: the node
only reports, and keeps every report until the ladder says it is stored (`ResultStored`), so a
result that ends while the link is down is sent again when it is back. Records are also
written to the node's own records directory, whatever the ladder makes of them.

The link is rebuilt with backoff whenever it fails (the ladder restarted, or dropped the node
after missed heartbeats); the node's bots and matches carry on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import os
import random
import resource
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import grpc
from scout.v1 import nodes_pb2, nodes_pb2_grpc
from scout_rules.protocol import TimeControl

from .. import __version__
from ..record import record_to_json
from .convert import requested_time_control
from .errors import MatchRequestError
from .events import MatchStatus
from .match import MatchRunner
from .referee import Referee

log = logging.getLogger("scout_arena.node")

BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0
WELCOME_TIMEOUT_S = 10.0
DEFAULT_JOIN_TIMEOUT_S = 10.0
CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
]


class LinkDown(Exception):
    """The node has no channel to its ladder now (its link is not running)."""


class NotWelcomed(Exception):
    """The ladder answered the node's hello with something else than a welcome."""


@dataclass(frozen=True)
class NodeConfig:
    ladder: str
    """host:port of the ladder."""
    token: str
    """The node token the ladder was started with."""
    advertise: str
    """host:port bots reach this node on."""
    capacity: int = 100
    name: str = ""
    bots_tls: bool = False
    """Bots reach this node over TLS."""
    ladder_credentials: grpc.ChannelCredentials | None = None
    """TLS to the ladder (None: plaintext)."""


def rss_bytes() -> int:
    """The process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _record_gzip(match: MatchRunner) -> bytes:
    assert match.record is not None
    return gzip.compress(json.dumps(record_to_json(match.record)).encode("utf-8"), 6)


class NodeHosting(Protocol):
    """What runs the hosted seats of the matches assigned to this node (`scout_arena.hosting`,
    which sits above the referee): None on a node that hosts no bots."""

    @property
    def can_host(self) -> bool: ...

    @property
    def problem(self) -> str:
        """Why this node cannot host (empty when it can)."""
        ...

    def assigned(self, link: NodeLink, assign: nodes_pb2.AssignMatch) -> None:
        """A match with hosted seats is held (`Referee.host_match`): start its bots."""

    def cancelled(self, match_id: str) -> None:
        """The ladder cancelled a held match: stop its bots."""


class NodeLink:
    """The node's side of `Nodes.Attach`, from `run` until cancelled."""

    def __init__(self, referee: Referee, config: NodeConfig,
                 hosting: NodeHosting | None = None) -> None:
        if config.capacity < 1:
            raise ValueError("a node's capacity is at least 1 match")
        self.referee = referee
        self.config = config
        self.held: set[str] = set()
        """Ladder matches held here (pending or running)."""
        self.unreported: dict[str, nodes_pb2.NodeMessage] = {}
        """Ended ladder matches the ladder has not yet said it stored, oldest first."""
        self.node_id: str | None = None
        self.attached = asyncio.Event()
        """Set while the link is up (for logs and tests)."""
        self._queue: asyncio.Queue[nodes_pb2.NodeMessage | None] | None = None
        self._decisions = 0
        self.hosting = hosting
        self._channel: grpc.aio.Channel | None = None
        referee.on_match_finished.append(self._match_finished)
        referee.assigned.on_hosting_failed.append(self._hosting_failed)

    # ----- what the referee tells us --------------------------------------------------------

    def _match_finished(self, match: MatchRunner) -> None:
        if match.match_id not in self.held:
            return
        self.held.discard(match.match_id)
        self._decisions += sum(len(r.actions) for r in match.state.round_logs)
        failure = "" if match.status is MatchStatus.FINISHED else "the node aborted the match"
        self._report(nodes_pb2.NodeMessage(match_ended=nodes_pb2.NodeMatchEnded(
            match_id=match.match_id, record_json_gzip=_record_gzip(match), failure=failure)))

    def _hosting_failed(self, match_id: str, why: str) -> None:
        if match_id not in self.held:
            return
        self.held.discard(match_id)
        self._report(nodes_pb2.NodeMessage(match_ended=nodes_pb2.NodeMatchEnded(
            match_id=match_id, failure=f"the node could not start it: {why}")))

    def _report(self, message: nodes_pb2.NodeMessage) -> None:
        self.unreported[message.match_ended.match_id] = message
        self._send(message)

    def _send(self, message: nodes_pb2.NodeMessage) -> None:
        if self._queue is not None:
            self._queue.put_nowait(message)

    async def flush(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) until the ladder has taken every report: on stop, so the
        matches just aborted are settled by the ladder rather than left in flight."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.unreported and self.attached.is_set() and loop.time() < deadline:
            await asyncio.sleep(0.05)

    # ----- the link -------------------------------------------------------------------------

    def channel(self) -> grpc.aio.Channel:
        """The channel to the ladder (for the hosting calls beside `Attach`)."""
        if self._channel is None:
            raise LinkDown("the node's link to its ladder is not running")
        return self._channel

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.config.token}"),)

    async def run(self) -> None:
        """Keep the link up until cancelled, rebuilding it with backoff after each failure."""
        config = self.config
        if config.ladder_credentials is None:
            channel = grpc.aio.insecure_channel(config.ladder, options=CHANNEL_OPTIONS)
        else:
            channel = grpc.aio.secure_channel(config.ladder, config.ladder_credentials,
                                              options=CHANNEL_OPTIONS)
        self._channel = channel
        rng = random.Random()
        delay = BACKOFF_FIRST_S
        try:
            while True:
                started = time.monotonic()
                try:
                    await self._session(channel)
                    problem = "the ladder ended the link"
                except grpc.aio.AioRpcError as exc:
                    problem = f"{exc.code().name}: {exc.details() or ''}"
                    if exc.code() in (grpc.StatusCode.UNAUTHENTICATED,
                                      grpc.StatusCode.PERMISSION_DENIED):
                        log.error("the ladder %s refuses this node (%s): check --node-token",
                                  config.ladder, problem)
                except TimeoutError:
                    problem = f"no NodeWelcome within {WELCOME_TIMEOUT_S:g} s"
                except NotWelcomed as exc:
                    problem = str(exc)
                finally:
                    self.attached.clear()
                    self._queue = None
                if time.monotonic() - started > 10.0:
                    delay = BACKOFF_FIRST_S
                wait = delay * rng.uniform(0.5, 1.0)
                log.warning("link to the ladder %s lost (%s); %d matches held here carry on; "
                            "reattaching in %.1f s", config.ladder, problem, len(self.held), wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, BACKOFF_MAX_S)
        finally:
            self._channel = None
            await channel.close(None)

    async def _session(self, channel: grpc.aio.Channel) -> None:
        config = self.config
        queue: asyncio.Queue[nodes_pb2.NodeMessage | None] = asyncio.Queue()
        queue.put_nowait(nodes_pb2.NodeMessage(hello=nodes_pb2.NodeHello(
            address=config.advertise, capacity=config.capacity, version=__version__,
            name=config.name or config.advertise, running_match_ids=sorted(self.held),
            tls=config.bots_tls, can_host=self.hosting is not None and self.hosting.can_host,
            host_problem="this node was started without hosting" if self.hosting is None
            else self.hosting.problem)))

        async def outgoing() -> AsyncIterator[nodes_pb2.NodeMessage]:
            while (message := await queue.get()) is not None:
                yield message

        stub = nodes_pb2_grpc.NodesStub(channel)
        call = stub.Attach(outgoing(), metadata=(("authorization", f"Bearer {config.token}"),))
        heartbeat: asyncio.Task[None] | None = None
        try:
            first = await asyncio.wait_for(call.read(), WELCOME_TIMEOUT_S)
            if not isinstance(first, nodes_pb2.LadderMessage) or \
                    first.WhichOneof("body") != "welcome":
                raise NotWelcomed("the ladder did not answer NodeHello with NodeWelcome")
            welcome = first.welcome
            self.node_id = welcome.node_id
            self._queue = queue
            self.attached.set()
            log.info("attached to the ladder %s as node %s (%s, capacity %d)", config.ladder,
                     welcome.node_id, config.advertise, config.capacity)
            for report in list(self.unreported.values()):
                queue.put_nowait(report)
            heartbeat = asyncio.create_task(
                self._heartbeats(queue, max(0.05, (welcome.heartbeat_ms or 1000) / 1000)))
            while isinstance(order := await call.read(), nodes_pb2.LadderMessage):
                self._obey(order)
        finally:
            queue.put_nowait(None)
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            call.cancel()

    async def _heartbeats(self, queue: asyncio.Queue[nodes_pb2.NodeMessage | None],
                          every_s: float) -> None:
        while True:
            running = len(self.referee.matches.running) + len(self.referee.assigned.pending)
            connected = sum(1 for bot in self.referee.bots if bot.connection is not None)
            queue.put_nowait(nodes_pb2.NodeMessage(heartbeat=nodes_pb2.NodeHeartbeat(
                running_matches=running, connected_bots=connected, decisions=self._decisions,
                rss_bytes=rss_bytes(), cpu_seconds=time.process_time())))
            await asyncio.sleep(every_s)

    def _obey(self, message: nodes_pb2.LadderMessage) -> None:
        body = message.WhichOneof("body")
        if body == "assign":
            self._assign(message.assign)
        elif body == "cancel":
            cancel = message.cancel
            self.referee.cancel_match(cancel.match_id, cancel.reason or "cancelled by the ladder",
                                      voided=True)
            if self.hosting is not None:
                self.hosting.cancelled(cancel.match_id)
        elif body == "stored":
            self.unreported.pop(message.stored.match_id, None)
        else:
            log.warning("ignoring a message from the ladder with no body this node knows")

    def _assign(self, assign: nodes_pb2.AssignMatch) -> None:
        match_id = assign.match_id
        running = len(self.referee.matches.running) + len(self.referee.assigned.pending)
        reason = ""
        hosted = any(seat.HasField("hosted") for seat in assign.seats)
        if hosted and (self.hosting is None or not self.hosting.can_host):
            reason = "this node does not host bots"
        elif match_id in self.held or match_id in self.unreported:
            reason = f"match {match_id} is held here already"
        elif running >= self.config.capacity:
            reason = f"the node is full ({running} of {self.config.capacity} matches)"
        else:
            try:
                tc: TimeControl = requested_time_control(assign, self.referee.default_time_control)
                self.held.add(match_id)
                self.referee.host_match(
                    match_id, [(s.bot_name, s.ticket) for s in assign.seats], assign.seed, tc,
                    (assign.join_timeout_ms or DEFAULT_JOIN_TIMEOUT_S * 1000) / 1000,
                    meta={"node": self.config.name or self.config.advertise})
                if hosted and self.hosting is not None:
                    self.hosting.assigned(self, assign)
                log.info("holding ladder match %s for its %d bots", match_id, len(assign.seats))
            except (MatchRequestError, ValueError) as exc:
                self.held.discard(match_id)
                reason = str(exc)
        if reason:
            log.warning("refused ladder match %s: %s", match_id, reason)
        self._send(nodes_pb2.NodeMessage(assignment_reply=nodes_pb2.AssignmentReply(
            match_id=match_id, accepted=not reason, reason=reason)))
