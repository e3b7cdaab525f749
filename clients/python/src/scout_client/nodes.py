"""Streams to the referee nodes a ladder assigns matches to (PROTOCOL.md §3.8).

The main stream may bring an `Assignment`: a match hosted by another node, with a ticket. The
bot then holds one stream per node address, opened with the newest ticket it has for that
address; each node stream has its own outbox, decisions and match workers (an answer goes back
on the stream that carried its request), and every match ended on any stream counts toward
`max_matches`. A node stream outlives its first match (later matches there come on it), is
reopened with backoff while the bot holds a ticket of an unfinished match there, and is let go
once it has none. Nothing about a node stream ever stops the bot: only the main stream does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from grpc import aio

from .connection import Connection, Outbox, backoff_delay, bearer_metadata
from .decisions import BotCalls, Decisions
from .errors import ConnectionRejected
from .matches import Matches, Tally
from .types import Assignment, Hello, MatchEnded, Welcome

__all__ = ["NodeStreams"]

log = logging.getLogger("scout_client")

UNREACHABLE_AFTER_S = 60.0
"""A node with no welcomed stream for this long is gone: its tickets are dropped (§3.8)."""

ChannelFactory = Callable[[str, bool], aio.Channel]
"""(address, tls) -> a channel to a node, with the main connection's certificates."""


@dataclass(eq=False)
class _Node:
    address: str
    tls: bool
    tickets: dict[str, str] = field(default_factory=dict)
    """Ticket by match id, for the assigned matches there that have not ended (newest last)."""
    task: asyncio.Task[None] | None = None
    matches: Matches | None = None
    """The matches of its streams, while the bot serves the node."""


class NodeStreams:
    """The bot's node streams: `assign` is the main stream's `on_assignment`."""

    def __init__(
        self,
        calls: BotCalls,
        tally: Tally,
        hello: Hello,
        open_channel: ChannelFactory,
        stop: asyncio.Event,
        *,
        safety_margin_ms: int,
        use_time_bank: bool,
        unreachable_after_s: float = UNREACHABLE_AFTER_S,
    ) -> None:
        self._unreachable_after_s = unreachable_after_s
        self._calls = calls
        self._tally = tally
        self._hello = hello
        self._open_channel = open_channel
        self._stop = stop
        self._margin_ms = safety_margin_ms
        self._use_time_bank = use_time_bank
        self._nodes: dict[str, _Node] = {}

    def assign(self, assignment: Assignment) -> None:
        """Remember the ticket, and open a stream to the node unless one is open there."""
        if not assignment.address or not assignment.ticket:
            log.warning("ignoring an assignment to match %s without an address or ticket",
                        assignment.match_id)
            return
        node = self._nodes.get(assignment.address)
        if node is None:
            node = self._nodes[assignment.address] = _Node(assignment.address, assignment.tls)
        elif node.matches is not None and node.matches.has_ended(assignment.match_id):
            return  # sent again after a Welcome while the ladder was hearing that it ended
        node.tickets.pop(assignment.match_id, None)
        node.tickets[assignment.match_id] = assignment.ticket
        log.info("match %s is played on node %s", assignment.match_id, assignment.address)
        if node.task is None or node.task.done():
            node.task = asyncio.ensure_future(self._serve(node))

    def end(self, ended: MatchEnded, received_at: float) -> bool:
        """A MatchEnded for a match assigned to a node, come on the main stream (the ladder
        voided it: its node was lost): the match ends with the node's other matches (once,
        whichever stream said it first) and its ticket is dropped. False when no node has the
        match."""
        for node in self._nodes.values():
            known = node.matches is not None and node.matches.knows(ended.match_id)
            if ended.match_id not in node.tickets and not known:
                continue
            node.tickets.pop(ended.match_id, None)
            if node.matches is not None:
                node.matches.receive(ended, received_at)
            return True
        return False

    @property
    def open_addresses(self) -> list[str]:
        """Nodes the bot holds (or is opening) a stream to."""
        return sorted(a for a, n in self._nodes.items() if n.task is not None and
                      not n.task.done())

    async def _serve(self, node: _Node) -> None:
        """The node's streams, one after another, while it has a ticket to open one with."""
        channel = self._open_channel(node.address, node.tls)
        outbox = Outbox()
        decisions = Decisions(self._calls, outbox, safety_margin_ms=self._margin_ms,
                              use_time_bank=self._use_time_bank)

        def ended(match_id: str) -> None:
            node.tickets.pop(match_id, None)

        matches = node.matches = Matches(self._calls, decisions, tally=self._tally,
                                         on_end=ended)
        rng = random.Random()
        attempt = 0
        loop = asyncio.get_running_loop()
        reached_at = loop.time()
        """When the node was last known reachable: the link began, or a welcomed stream there
        ended (so a node that served for long is not dropped at its first failed reopen)."""
        welcomed_now = False

        def welcomed(welcome: Welcome) -> None:
            nonlocal welcomed_now
            welcomed_now = True
            matches.resync(welcome)

        try:
            while not self._stop.is_set() and node.tickets:
                match_id, ticket = next(reversed(node.tickets.items()))
                connection = Connection(
                    channel, bearer_metadata(ticket), self._hello, outbox,
                    on_welcome=welcomed, on_match_message=matches.receive,
                    stop=self._stop, peer=f"node {node.address}")
                log.info("opening a stream to node %s (ticket of match %s)", node.address,
                         match_id)
                welcomed_now = False
                try:
                    goodbye = await connection.session()
                    problem = "the node ended the stream" if goodbye is None else \
                        f"the node said goodbye ({goodbye.reason.name})"
                    attempt = 0
                except ConnectionRejected as error:
                    if error.code is not grpc.StatusCode.UNAUTHENTICATED:
                        log.error("node %s refused the bot (%s); not playing there",
                                  node.address, error)
                        return
                    log.info("node %s refused the ticket of match %s (it is over there)",
                             node.address, match_id)
                    node.tickets.pop(match_id, None)
                    continue
                except aio.AioRpcError as error:
                    problem = f"{error.code().name}: {error.details() or ''}"
                if welcomed_now:
                    reached_at = loop.time()
                if self._stop.is_set() or not node.tickets:
                    log.info("closed the stream to node %s (%s)", node.address, problem)
                    return
                if loop.time() - reached_at >= self._unreachable_after_s:
                    log.warning("node %s unreachable for %.0f s (%s); dropping its %d "
                                "ticket(s) and letting it go", node.address,
                                loop.time() - reached_at, problem, len(node.tickets))
                    node.tickets.clear()
                    return
                delay = backoff_delay(attempt, rng)
                attempt += 1
                log.warning("stream to node %s lost (%s) with %d match(es) unfinished there; "
                            "reopening in %.2f s", node.address, problem, len(node.tickets),
                            delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
        finally:
            stopping = [*matches.cancel(), *decisions.cancel()]
            await asyncio.gather(*stopping, return_exceptions=True)
            await channel.close(None)

    async def close(self) -> None:
        """Stop every node stream (the bot is stopping)."""
        tasks = [n.task for n in self._nodes.values() if n.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
