"""Where a table's match is played: on the ladder's own referee, or on a referee node.

The scheduler asks its `Placement` how many matches may start (`room`) and hands it each
table (`begin`). With nodes, `NodePlacement` picks the node (`NodeRegistry.place`, among the
nodes every `NodePlacement.node_filters` entry accepts for that table), reserves its room and
the bots' seats at once, and writes, assigns and announces the match in a task of its own.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Protocol

from scout.v1 import game_pb2, nodes_pb2
from scout_arena.record import JSON
from scout_arena.server import RefereeFacade

from .config import LadderConfig
from .flight import VOID_BEFORE_START, Flight, MatchFlights, new_intent_id
from .nodes import NodeRegistry, NodeSession
from .roster import Roster
from .runtime import Background, RunFlags

log = logging.getLogger("scout_ladder")

NodeFilter = Callable[[Sequence[str], NodeSession], bool]
"""Whether a node can host a table of these bots (a capability the table needs)."""

NODELESS_WARNING_EVERY_S = 30.0
HOSTED_JOIN_TIMEOUT_S = 20.0
"""The least join timeout of a match with hosted seats (their node starts them first)."""


class HostedSeats(Protocol):
    """The hosted seats of a match placed on a node (`hosting.LadderHosting`)."""

    def seat(self, match_id: str, names: Sequence[str]) -> dict[str, nodes_pb2.HostedSeat]:
        """Take the hosted bots among ``names`` for the match: what the node needs."""
        ...

    def unseat(self, match_id: str, names: Sequence[str]) -> None:
        """The match did not start: free them."""


class Placement(Protocol):
    """Starts the scheduler's tables somewhere."""

    def room(self) -> int | None:
        """Matches that may start now; None: unbounded."""
        ...

    def held(self) -> Mapping[str, Set[str]]:
        """Bot name -> matches reserved for it that its free seats do not show yet."""
        ...

    def notice_idle(self, idle: int) -> None:
        """Told of the idle bots before each pass (to warn when they cannot play)."""
        ...

    async def begin(self, names: list[str], challenge_id: int | None) -> None:
        """Start a match of these bots (it may refuse silently: no room, a bot gone)."""
        ...


class LocalPlacement:
    """Every match on the ladder's own referee, started one by one."""

    def __init__(self, flights: MatchFlights) -> None:
        self.flights = flights

    def room(self) -> int | None:
        return None

    def held(self) -> Mapping[str, Set[str]]:
        return {}

    def notice_idle(self, idle: int) -> None:
        pass

    async def begin(self, names: list[str], challenge_id: int | None) -> None:
        await self.flights.start_here(names, challenge_id)


class NodePlacement:
    """Every match on a referee node: which one, its reservations, and the start there."""

    def __init__(self, registry: NodeRegistry, flights: MatchFlights, roster: Roster,
                 referee: RefereeFacade, config: LadderConfig, flags: RunFlags,
                 background: Background) -> None:
        self.registry = registry
        self.flights = flights
        self.roster = roster
        self.referee = referee
        self.config = config
        self.flags = flags
        self.background = background
        self.node_filters: list[NodeFilter] = []
        """Each must accept a node for a table to be placed there."""
        self.hosted_seats: HostedSeats | None = None
        """Takes a match's hosted seats (the hosting code): what the node needs to run them;
        their bots are not told where the match is (the node starts them)."""
        self.node_seats: dict[str, set[str]] = {}
        """Bot -> ladder matches it plays (or is waiting for) on nodes."""
        self._nodeless_warned = -1e9

    def room(self) -> int:
        """The nodes' free capacity."""
        return self.registry.free_capacity()

    def held(self) -> Mapping[str, Set[str]]:
        return self.node_seats

    def notice_idle(self, idle: int) -> None:
        """With no node attached nothing can start: say so (every 30 s at most)."""
        if self.registry.live():
            return
        now = time.monotonic()
        if idle and now - self._nodeless_warned >= NODELESS_WARNING_EVERY_S:
            self._nodeless_warned = now
            log.warning("no referee node is attached: no match can start (%d bots waiting); "
                        "start nodes with `scout-arena referee serve --join %s`", idle,
                        self.referee.address)

    def _accepts(self, names: Sequence[str], node: NodeSession) -> bool:
        return all(accept(names, node) for accept in self.node_filters)

    async def begin(self, names: list[str], challenge_id: int | None) -> None:
        """Reserve the node's room and the bots' seats now, and do the rest in a task of its
        own, so that a pass seats thousands of bots without waiting on each write and reply
        in turn."""
        node = self.registry.place(
            names, (lambda node: self._accepts(names, node)) if self.node_filters else None)
        if node is None:
            return
        intent_id = new_intent_id()
        node.matches.add(intent_id)
        self.hold_seats(intent_id, names)
        self.roster.seated(names)
        self.background.spawn(self._start_on_node(node, intent_id, names, challenge_id),
                              f"start match {intent_id} on node {node.name}")

    def hold_seats(self, match_id: str, players: Sequence[str]) -> None:
        for name in players:
            self.node_seats.setdefault(name, set()).add(match_id)

    def release_seats(self, match_id: str, players: Sequence[str]) -> None:
        now = time.monotonic()
        for name in players:
            seats = self.node_seats.get(name)
            if seats is not None and match_id in seats:
                seats.discard(match_id)
                if not seats:
                    del self.node_seats[name]
                self.roster.idle_since[name] = now
        self.flags.wake.set()

    def _unreserve(self, node: NodeSession, intent_id: str, names: Sequence[str]) -> None:
        node.matches.discard(intent_id)
        self.release_seats(intent_id, names)

    async def _start_on_node(self, node: NodeSession, intent_id: str, names: list[str],
                             challenge_id: int | None) -> None:
        """Write a match reserved on a node (`begin`), have the node take it, then tell its
        bots where to play it. Whatever stops it first gives the reservation back."""
        flights, flags = self.flights, self.flags
        seed = None
        try:
            seed = await flights.write_intent(intent_id, names, challenge_id)
        finally:
            if seed is None or flags.stopping or not node.alive:
                self._unreserve(node, intent_id, names)
        if seed is None:
            return
        if flags.stopping or not node.alive:
            await flights.void_intent(intent_id, VOID_BEFORE_START if flags.stopping else
                                      f"its referee node {node.name} was lost before it began")
            return
        flights.flights[intent_id] = Flight(intent_id, intent_id, challenge_id,
                                            players=tuple(names), node=node.address)
        tickets = [(n, secrets.token_urlsafe(24)) for n in names]
        tc = self.config.time_control
        hosted = self.hosted_seats.seat(intent_id, names) if self.hosted_seats else {}
        join_timeout_s = self.config.join_timeout_s
        if hosted:  # the node fetches and starts them first: no seat lost to a slow start
            join_timeout_s = max(join_timeout_s, HOSTED_JOIN_TIMEOUT_S)
        reply = await node.assign(intent_id, tickets, seed, game_pb2.TimeControl(
            decision_ms=tc.decision_ms, time_bank_ms=tc.time_bank_ms,
            no_time_bank=tc.time_bank_ms == 0), join_timeout_s, hosted)
        if not reply.accepted:
            if self.hosted_seats is not None:
                self.hosted_seats.unseat(intent_id, names)
            if flights.flights.pop(intent_id, None) is not None:
                self._unreserve(node, intent_id, names)
                await flights.void_intent(intent_id,
                                          f"node {node.name} did not take it: {reply.reason}")
            return
        self._announce(node, intent_id, [(n, t) for n, t in tickets if n not in hosted])

    def _announce(self, node: NodeSession, match_id: str,
                  tickets: Sequence[tuple[str, str]]) -> None:
        """Tell each bot of a match the node took where to play it, with its ticket."""
        flight = self.flights.flights.get(match_id)
        if flight is not None:  # kept to send again after each Welcome of its bots
            flight.tickets, flight.node_tls = dict(tickets), node.tls
        for name, ticket in tickets:
            self.registry.last_node[name] = node.address
            if not self.referee.send_assignment(name, match_id, node.address, ticket,
                                                node.tls):
                log.info("bot %s left before it was told where match %s is played; its seat "
                         "forfeits unless it comes back in time", name, match_id)

    def node_report(self) -> list[JSON]:
        """The attached nodes and their load, then those lost lately (state "lost", with
        ``lost_reason`` and ``lost_at``), for the web pages and the CLI."""
        now = time.monotonic()
        attached: list[JSON] = [
            {"node_id": n.node_id, "name": n.name, "address": n.address, "state": "attached",
             "version": n.version, "capacity": n.capacity,
             "matches": len(n.matches), "running_matches": n.heartbeat.running_matches,
             "connected_bots": n.heartbeat.connected_bots,
             "decisions_per_s": round(n.decisions_per_s(), 1),
             "rss_mb": round(n.heartbeat.rss_bytes / 2**20, 1),
             "cpu_s": round(n.heartbeat.cpu_seconds, 1),
             "heartbeat_age_s": round(now - n.last_heartbeat, 2),
             "heartbeat_timeout_s": round(self.registry.timeout_for(n), 2),
             "attached_at": n.attached_at}
            for n in sorted(self.registry.live(), key=lambda n: n.address)]
        lost: list[JSON] = [
            {"node_id": n.node_id, "name": n.name, "address": n.address, "state": "lost",
             "version": n.version, "capacity": n.capacity, "matches": 0,
             "attached_at": n.attached_at, "lost_at": n.lost_at, "lost_reason": n.lost_reason}
            for n in reversed(self.registry.lost)]
        return attached + lost
