"""What the ladder does as its referee nodes attach, report and are lost (`NodeEvents`).

A node that attaches again keeps the matches it still plays; after a ladder restart, the
matches left in flight wait ``node_rejoin_s`` for a node to claim them, and are voided then.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

from scout.v1 import nodes_pb2
from scout_arena.record import MatchRecord, RecordError, record_from_json, replay
from scout_arena.text import brief

from .config import LadderConfig
from .flight import VOID_AT_STOP, Flight, MatchFlights
from .nodes import NodeSession
from .placement import NodePlacement
from .repository import Repository
from .runtime import Background, RunFlags

log = logging.getLogger("scout_ladder")

VOID_NODE_NOT_BACK = ("the ladder restarted and no referee node reported the match within "
                      "{seconds:g} s")
REPORT_GRACE_S = 10.0
"""After a node attaches again, how long a match it no longer runs may take to be reported
(a result that ended while the link was down comes right after the welcome)."""


def _cancel(match_id: str, reason: str) -> nodes_pb2.LadderMessage:
    return nodes_pb2.LadderMessage(cancel=nodes_pb2.CancelMatch(match_id=match_id, reason=reason))


class NodeMatches:
    """The ladder's side of `NodesServicer`: the matches on nodes as nodes come and go."""

    def __init__(self, repo: Repository, placement: NodePlacement, flights: MatchFlights,
                 config: LadderConfig, flags: RunFlags, background: Background) -> None:
        self.repo = repo
        self.placement = placement
        self.flights = flights
        self.config = config
        self.flags = flags
        self.background = background
        self.orphans: dict[str, Flight] = {}
        """After a restart: matches left in flight that no node has claimed yet."""
        self.voided_at_start: list[str] = []

    async def await_claims(self) -> None:
        """At start: what was in flight may still be playing on a node, or have ended there
        while the ladder was away. Nodes claim theirs as they attach (and report what
        ended); whatever is unclaimed after ``node_rejoin_s`` is voided."""
        in_flight = await asyncio.to_thread(self.repo.in_flight_matches)
        for summary in in_flight:
            players = tuple(seat.bot for seat in sorted(summary.seats, key=lambda s: s.seat))
            self.orphans[summary.match_id] = Flight(summary.match_id, summary.match_id,
                                                    summary.challenge_id, players=players)
            self.placement.hold_seats(summary.match_id, players)
        if in_flight:
            log.warning("%d matches were in flight when the ladder stopped; waiting %g s for "
                        "their nodes to claim them", len(in_flight), self.config.node_rejoin_s)
            self.background.spawn(self._void_unclaimed(), "void the matches no node claimed")

    async def _void_unclaimed(self) -> None:
        await asyncio.sleep(self.config.node_rejoin_s)
        reason = VOID_NODE_NOT_BACK.format(seconds=self.config.node_rejoin_s)
        for match_id, flight in list(self.orphans.items()):
            if self.orphans.pop(match_id, None) is None:
                continue
            self.placement.release_seats(match_id, flight.players)
            self.flights.tell_voided(match_id, flight.players, reason)
            self.voided_at_start.append(match_id)
            await self.flights.db.run(f"void match {match_id}", self.repo.void_match, match_id,
                                      reason)
        self.flags.wake.set()

    def _claim(self, match_id: str) -> Flight | None:
        """The match's flight, adopted from the orphans when it is one."""
        flights = self.flights.flights
        flight = flights.get(match_id)
        if flight is None and (flight := self.orphans.pop(match_id, None)) is not None:
            flights[match_id] = flight
        return flight

    def node_attached(self, node: NodeSession, running: Sequence[str],
                      previous: NodeSession | None) -> None:
        """A node attached: it keeps the matches it still plays (ours, or left in flight by
        our predecessor); any other it plays was voided meanwhile and is cancelled."""
        claimed = set()
        for match_id in running:
            orphan = match_id not in self.flights.flights and match_id in self.orphans
            flight = self._claim(match_id)
            if orphan and flight is not None:
                flight.node = node.address
                log.info("node %s claimed match %s, in flight since before the restart",
                         node.name, match_id)
            if flight is not None and flight.node == node.address:
                node.matches.add(match_id)
                claimed.add(match_id)
                continue
            node.send(_cancel(match_id, "the ladder voided this match while the node was away"))
        if previous is not None:
            # Ended while the link was down (reported right after the welcome), or lost.
            waiting = previous.matches - claimed
            node.matches |= waiting
            if waiting:
                self.background.spawn(self._expect_reports(node, waiting),
                                      f"wait for node {node.name}'s reports")
        self.flags.wake.set()

    async def _expect_reports(self, node: NodeSession, match_ids: set[str]) -> None:
        await asyncio.sleep(REPORT_GRACE_S)
        for match_id in sorted(match_ids):
            flight = self.flights.flights.get(match_id)
            if flight is None or flight.node != node.address or match_id not in node.matches:
                continue
            node.matches.discard(match_id)
            self.placement.release_seats(match_id, flight.players)
            await self.flights.settle_void(flight, f"node {node.name} ({node.address}) "
                                                   "attached again without it and did not "
                                                   "report it")

    def node_lost(self, node: NodeSession, reason: str) -> None:
        """Void what the node was playing and free its bots, who are seated elsewhere (unless
        the ladder is stopping: then the node reports them to the next start)."""
        lost = sorted(node.matches)
        node.matches.clear()
        if self.flags.stopping:
            return
        for match_id in lost:
            flight = self.flights.flights.get(match_id)
            if flight is None or flight.node != node.address:
                continue
            self.placement.release_seats(match_id, flight.players)
            self.background.spawn(self.flights.settle_void(
                flight, f"its referee node {node.name} ({node.address}) was lost: {reason}"),
                f"void match {match_id}")
        if lost:
            log.warning("voided %d matches of the lost node %s", len(lost), node.name)

    async def node_match_ended(self, node: NodeSession, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        """Settle what a node reported: rate a finished match once (a repeat or a match voided
        meanwhile is not rated), void one that did not finish."""
        flight = self._claim(match_id)
        if flight is not None and flight.node not in (None, node.address):
            return False, f"match {match_id} is not this node's"
        if flight is not None:
            self.placement.release_seats(match_id, flight.players)
        record: MatchRecord | None = None
        if record_json is not None:
            try:
                record = record_from_json(json.loads(record_json))
                replay(record)
            except (RecordError, ValueError) as exc:
                record, failure = None, f"its record does not replay: {brief(exc)}"
        if record is not None and flight is not None and tuple(record.players) != flight.players:
            record, failure = None, "its record seats other bots than the ladder assigned"
        if record is None or record.status != "finished" or record.outcome is None:
            why = failure or "it was aborted on the node"
            if flight is not None:
                # Paused: the ladder is stopping its local nodes, which abort what they play.
                await self.flights.settle_void(flight, VOID_AT_STOP if self.flags.paused else
                                               f"node {node.name}: {why}")
            return False, f"not rated: {why}"
        if flight is None:
            return await self.flights.keep_late_record(match_id, record)
        await self.flights.record_result(flight, record)
        return True, "rated"
