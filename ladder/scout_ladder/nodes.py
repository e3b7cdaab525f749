"""The ladder's referee nodes: who they are, how loaded, and the `Nodes` service they attach to.

A node (``scout-arena referee serve --join``) holds one `Nodes.Attach` stream to the ladder
for as long as it serves (nodes.proto). The ladder knows a node by its advertised address: a
node that attaches again from the same address (its link flapped, or the ladder restarted)
takes over the matches the ladder still has on it, so a short outage of the link costs no
match. A node whose stream ends, or whose heartbeats stop for ``heartbeat_timeout_s`` (a
stopped or partitioned process keeps its TCP connection open), is *lost*: the ladder voids the
matches it had there and seats their bots elsewhere (`NodeEvents.node_lost`).

Placement (`NodeRegistry.place`): the least loaded node with room (matches / capacity), and
only among equally loaded ones the node the table's bots most recently played on (their
streams there are likely still open, PROTOCOL.md §3.8), then the one with the most room. Load
is spread from the first match: a second node is a second core, idle no more (issue 30).
Nothing here touches the database: the ladder does, through its repository.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import grpc
from scout.v1 import game_pb2, nodes_pb2, nodes_pb2_grpc
from scout_arena.server import RefereeFacade

log = logging.getLogger("scout_ladder.nodes")

Context = grpc.aio.ServicerContext[object, object]

HELLO_TIMEOUT_S = 10.0
REPLY_TIMEOUT_S = 5.0
GAP_FACTOR = 3.0
"""A node is lost after this many times its longest recent heartbeat gap (when that is
longer than the configured timeout): a loaded node that heartbeats late but steadily stays."""
MAX_STRETCH = 4.0
"""The timeout grows to this many times the configured one at most: a hung node is still
dropped, if later."""
GAPS_KEPT = 30
LOST_KEPT = 20
"""Lost nodes the ladder keeps listing (the newest)."""
MAX_RECORD_BYTES = 8 * 1024 * 1024
"""Largest record a node may report, uncompressed (a 5-player record is far smaller)."""


@dataclass(eq=False)
class NodeSession:
    """One attachment of a node: its stream, its load and the ladder matches on it."""

    node_id: str
    address: str
    name: str
    capacity: int
    version: str
    tls: bool
    attached_at: float
    outbox: asyncio.Queue[nodes_pb2.LadderMessage | None] = field(default_factory=asyncio.Queue)
    matches: set[str] = field(default_factory=set)
    """Ladder matches assigned here and not ended (accepted, or waiting for the reply)."""
    replies: dict[str, asyncio.Future[nodes_pb2.AssignmentReply]] = field(default_factory=dict)
    last_heartbeat: float = 0.0
    heartbeat: nodes_pb2.NodeHeartbeat = field(default_factory=nodes_pb2.NodeHeartbeat)
    alive: bool = True
    lost_reason: str = ""
    lost_at: float | None = None
    """Unix time the ladder lost it (None while attached)."""
    handler: asyncio.Task[object] | None = None
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=GAPS_KEPT))
    """Seconds between its recent heartbeats, as the ladder read them."""
    decisions_seen: list[tuple[float, int]] = field(default_factory=list)
    """(monotonic time, decisions) of recent heartbeats, for a decisions/s figure."""
    can_host: bool = False
    """The node runs hosted bots in its sandbox (NodeHello.can_host)."""
    host_problem: str = ""

    @property
    def free(self) -> int:
        return self.capacity - len(self.matches)

    @property
    def load(self) -> float:
        return len(self.matches) / self.capacity

    def send(self, message: nodes_pb2.LadderMessage) -> None:
        if self.alive:
            self.outbox.put_nowait(message)

    def decisions_per_s(self) -> float:
        seen = self.decisions_seen
        if len(seen) < 2 or seen[-1][0] <= seen[0][0]:
            return 0.0
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    async def assign(self, match_id: str, seats: Sequence[tuple[str, str]], seed: int,
                     time_control: game_pb2.TimeControl, join_timeout_s: float,
                     hosted: Mapping[str, nodes_pb2.HostedSeat] | None = None
                     ) -> nodes_pb2.AssignmentReply:
        """Ask the node to host a match (``hosted``: the seats it runs in its sandbox); its
        reply (a refusal if it does not answer in time, or is lost meanwhile)."""
        future: asyncio.Future[nodes_pb2.AssignmentReply] = \
            asyncio.get_running_loop().create_future()
        self.replies[match_id] = future
        self.matches.add(match_id)
        self.send(nodes_pb2.LadderMessage(assign=nodes_pb2.AssignMatch(
            match_id=match_id, seed=seed, time_control=time_control,
            seats=[nodes_pb2.SeatTicket(bot_name=n, ticket=t, hosted=(hosted or {}).get(n))
                   for n, t in seats],
            join_timeout_ms=round(join_timeout_s * 1000))))
        try:
            return await asyncio.wait_for(asyncio.shield(future), REPLY_TIMEOUT_S)
        except TimeoutError:
            return nodes_pb2.AssignmentReply(
                match_id=match_id, accepted=False,
                reason=f"node {self.name} did not answer within {REPLY_TIMEOUT_S:g} s")
        finally:
            self.replies.pop(match_id, None)

    def fail_replies(self, reason: str) -> None:
        for match_id, future in list(self.replies.items()):
            if not future.done():
                future.set_result(nodes_pb2.AssignmentReply(match_id=match_id, accepted=False,
                                                            reason=reason))


class NodeEvents(Protocol):
    """What the ladder does as nodes come, report and go."""

    def node_attached(self, node: NodeSession, running: Sequence[str],
                      previous: NodeSession | None) -> None: ...

    def node_lost(self, node: NodeSession, reason: str) -> None: ...

    async def node_match_ended(self, node: NodeSession, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        """Settle a match a node reported; (rated now, note for the node's log)."""
        ...


@dataclass
class NodeRegistry:
    """The nodes attached now, by address."""

    heartbeat_s: float = 1.0
    heartbeat_timeout_s: float = 5.0
    nodes: dict[str, NodeSession] = field(default_factory=dict)
    last_node: dict[str, str] = field(default_factory=dict)
    """Bot name -> address of the node it last played on."""
    stopping: bool = False
    """The ladder is stopping (set by `Ladder.stop`): a node's call cancelled now was cut by
    the ladder, not lost by the node."""
    lost: deque[NodeSession] = field(default_factory=lambda: deque(maxlen=LOST_KEPT))
    """The nodes lost lately, newest last: the operator sees them (state "lost", why, when)
    where the attached ones are listed, not only in the log."""

    def live(self) -> list[NodeSession]:
        return [n for n in self.nodes.values() if n.alive]

    def timeout_for(self, node: NodeSession) -> float:
        """How long ``node`` may be silent: the configured timeout, stretched to `GAP_FACTOR`
        times its longest recent heartbeat gap (a busy host's heartbeats come late), at most
        `MAX_STRETCH` times the configured one."""
        longest = max(node.gaps, default=0.0)
        return min(self.heartbeat_timeout_s * MAX_STRETCH,
                   max(self.heartbeat_timeout_s, GAP_FACTOR * longest))

    def free_capacity(self) -> int:
        return sum(max(0, n.free) for n in self.live())

    def place(self, bots: Sequence[str],
              accepts: Callable[[NodeSession], bool] | None = None) -> NodeSession | None:
        """The node for a table of ``bots``, or None when no node has room (among those
        ``accepts`` takes, when given: nodes that can host what the table needs)."""
        candidates = [n for n in self.live()
                      if n.free > 0 and (accepts is None or accepts(n))]
        if not candidates:
            return None

        def preference(node: NodeSession) -> tuple[float, int, int, str]:
            familiar = sum(1 for b in bots if self.last_node.get(b) == node.address)
            return -node.load, familiar, node.free, node.address

        return max(candidates, key=preference)


def _decode_record(data: bytes) -> str:
    try:
        raw = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise ValueError(f"the record is not gzip data: {exc}") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise ValueError(f"the record is {len(raw)} bytes, more than {MAX_RECORD_BYTES}")
    return raw.decode("utf-8")


class HostingCalls(Protocol):
    """The hosting calls of the Nodes service (`hostedfiles.HostedFiles`)."""

    def FetchBotFiles(self, request: nodes_pb2.FetchBotFilesRequest, context: Context
                      ) -> AsyncIterator[nodes_pb2.FileChunk]: ...

    async def ReportHostedRun(self, request_iterator: AsyncIterator[nodes_pb2.HostedRunPart],
                              context: Context) -> nodes_pb2.HostedRunStored: ...


class NodesServicer(nodes_pb2_grpc.NodesServicer):
    """`Nodes.Attach`: authenticate, register, then heartbeats, replies and reports."""

    def __init__(self, registry: NodeRegistry, events: NodeEvents, token: str,
                 hosting: HostingCalls | None = None) -> None:
        self.hosting = hosting
        """The hosting calls (`hostedfiles.HostedFiles`); None: answered UNIMPLEMENTED."""
        self.registry = registry
        self.events = events
        self._settling: set[asyncio.Future[tuple[bool, str]]] = set()
        """Reports being settled; kept so that one outliving its stream is not collected."""
        self.token = token

    async def Attach(
        self, request_iterator: AsyncIterator[nodes_pb2.NodeMessage], context: Context
    ) -> AsyncIterator[nodes_pb2.LadderMessage]:
        if not RefereeFacade.tokens_equal(RefereeFacade.bearer_token(context), self.token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "a node attaches with 'authorization: Bearer <node token>', the "
                                "token the ladder was started with (--node-token)")
        incoming = request_iterator.__aiter__()
        try:
            first = await asyncio.wait_for(incoming.__anext__(), HELLO_TIMEOUT_S)
        except (TimeoutError, StopAsyncIteration):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"send NodeHello first, within {HELLO_TIMEOUT_S:g} s")
            raise AssertionError("abort raises") from None
        hello = first.hello
        if first.WhichOneof("body") != "hello" or not hello.address or hello.capacity < 1:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the first message is NodeHello, with the address bots reach "
                                "the node on and a capacity of at least 1")
        node = NodeSession(
            node_id=f"n-{secrets.token_hex(4)}", address=hello.address,
            name=hello.name or hello.address, capacity=hello.capacity, version=hello.version,
            tls=hello.tls, attached_at=time.time(), last_heartbeat=time.monotonic(),
            can_host=hello.can_host, host_problem=hello.host_problem)
        node.handler = asyncio.current_task()
        previous = self.registry.nodes.get(node.address)
        if previous is not None:
            previous.alive = False
            previous.lost_reason = "the node attached again"
            previous.fail_replies("the node attached again")
            previous.outbox.put_nowait(None)
            if previous.handler is not None:
                previous.handler.cancel()
        self.registry.nodes[node.address] = node
        self.events.node_attached(node, list(hello.running_match_ids), previous)
        log.info("node %s attached from %s (capacity %d, version %s, %d matches running)",
                 node.name, node.address, node.capacity, node.version,
                 len(hello.running_match_ids))
        yield nodes_pb2.LadderMessage(welcome=nodes_pb2.NodeWelcome(
            node_id=node.node_id, heartbeat_ms=round(self.registry.heartbeat_s * 1000),
            heartbeat_timeout_ms=round(self.registry.heartbeat_timeout_s * 1000)))
        reader = asyncio.create_task(self._read(node, incoming))
        watchdog = asyncio.create_task(self._watch(node))
        reason = "its stream ended"
        try:
            while (message := await node.outbox.get()) is not None:
                yield message
            reason = node.lost_reason or reason
        except asyncio.CancelledError:
            reason = node.lost_reason or (
                "the ladder is stopping" if self.registry.stopping
                else "its call was cut off (the node stopped or its connection broke)")
            raise
        finally:
            self._lose(node, reason)
            for task in (reader, watchdog):
                task.cancel()

    async def FetchBotFiles(self, request: nodes_pb2.FetchBotFilesRequest, context: Context
                            ) -> AsyncIterator[nodes_pb2.FileChunk]:
        if self.hosting is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ladder hosts no bots")
            raise AssertionError("abort raises")
        async for chunk in self.hosting.FetchBotFiles(request, context):
            yield chunk

    async def ReportHostedRun(self, request_iterator: AsyncIterator[nodes_pb2.HostedRunPart],
                              context: Context) -> nodes_pb2.HostedRunStored:
        if self.hosting is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this ladder hosts no bots")
            raise AssertionError("abort raises")
        return await self.hosting.ReportHostedRun(request_iterator, context)

    def _lose(self, node: NodeSession, reason: str) -> None:
        if self.registry.nodes.get(node.address) is node:
            del self.registry.nodes[node.address]
        was_alive = node.alive
        node.alive = False
        node.fail_replies(f"node {node.name} was lost: {reason}")
        if was_alive or node.lost_reason != "the node attached again":
            log.warning("node %s (%s) lost: %s", node.name, node.address, reason)
            node.lost_reason, node.lost_at = reason, time.time()
            self.registry.lost.append(node)
            self.events.node_lost(node, reason)

    async def _read(self, node: NodeSession,
                    incoming: AsyncIterator[nodes_pb2.NodeMessage]) -> None:
        try:
            async for message in incoming:
                body = message.WhichOneof("body")
                if body == "heartbeat":
                    now = time.monotonic()
                    node.gaps.append(now - node.last_heartbeat)  # the first: since attach
                    node.last_heartbeat = now
                    node.heartbeat = message.heartbeat
                    node.decisions_seen.append((node.last_heartbeat, message.heartbeat.decisions))
                    del node.decisions_seen[:-30]
                elif body == "assignment_reply":
                    reply = message.assignment_reply
                    future = node.replies.get(reply.match_id)
                    if future is not None and not future.done():
                        future.set_result(reply)
                elif body == "match_ended":
                    await self._ended(node, message.match_ended)
                else:
                    log.warning("node %s sent a message with no body the ladder knows", node.name)
        except Exception as exc:  # the stream broke: the node is lost
            node.lost_reason = node.lost_reason or f"its stream failed ({type(exc).__name__})"
        else:
            node.lost_reason = node.lost_reason or "it closed its stream"
        node.outbox.put_nowait(None)

    async def _ended(self, node: NodeSession, ended: nodes_pb2.NodeMatchEnded) -> None:
        record_json: str | None = None
        failure = ended.failure
        if ended.record_json_gzip:
            try:
                record_json = _decode_record(ended.record_json_gzip)
            except ValueError as exc:
                failure = f"its record could not be read: {exc}"
        # Settled whatever becomes of this stream: grpc cancels the handler when the node's
        # connection drops (a node killed just after it reported), and a settle cut off
        # between its database write and the ladder's in-memory ratings would leave the two
        # apart, and every later rating of those bots wrong.
        settle = asyncio.ensure_future(
            self.events.node_match_ended(node, ended.match_id, record_json, failure))
        self._settling.add(settle)
        settle.add_done_callback(self._settling.discard)
        rated, note = await asyncio.shield(settle)
        node.matches.discard(ended.match_id)
        node.send(nodes_pb2.LadderMessage(stored=nodes_pb2.ResultStored(
            match_id=ended.match_id, rated=rated, note=note)))

    async def _watch(self, node: NodeSession) -> None:
        """Drop the node once it is silent past `NodeRegistry.timeout_for`. When the ladder's
        own loop was held up (the watchdog woke late), the heartbeats waiting to be read are
        read first: the ladder's stall is not the node's silence."""
        period = self.registry.heartbeat_s / 2
        while node.alive:
            before = time.monotonic()
            await asyncio.sleep(period)
            now = time.monotonic()
            if now - before > period + self.registry.heartbeat_s:
                continue  # the ladder stalled: look again once the reader has caught up
            silent = now - node.last_heartbeat
            timeout = self.registry.timeout_for(node)
            if silent > timeout:
                node.lost_reason = (f"no heartbeat for {silent:.1f} s (its timeout "
                                    f"{timeout:.1f} s)")
                node.outbox.put_nowait(None)
                # A stopped node does not read: should the stream's end not go out, the
                # handler is cancelled (the node is lost either way, in its finally).
                await asyncio.sleep(2.0)
                if node.handler is not None and not node.handler.done():
                    node.handler.cancel()
                return
