"""The ladder: its referee, its scheduler and its gRPC `Ladder` service, on one event loop.

Storage goes through `Repository` only, always via ``asyncio.to_thread`` so no database call
blocks the loop. Results are rated and committed one at a time under a lock, in the order the
matches finish; `recompute` replays that same order, so the stored ratings can be checked.

The life of a match, and why nothing finished is ever lost:

1. **Intent first.** The in-flight row is committed (under an id of the ladder's own) *before*
   the referee is asked for the match, so no match can end before its row exists. If the
   referee then refuses (a bot left meanwhile), the row is voided with that reason.
2. **Bind.** The referee names the match when it starts it; the row is renamed to that id
   right away, and whatever ends the match waits for the rename first. (A referee that let the
   caller choose the id would make this step vanish.)
3. **Settle.** A finished match is stored with its ratings, an aborted one voided with a true
   reason. Every such write is idempotent in the repository and retried here, with backoff,
   for as long as the database fails for a transient reason; any other failure is logged and
   the match voided saying so. No task's exception goes unlogged.
4. **Stop.** A clean stop stops scheduling, lets the referee abort what is running (each abort
   voids its row: "the ladder was stopped"), waits for every pending write, and only then
   releases the lease. So only a crash or a kill leaves rows in flight for the next start.

One ladder per database: `start` takes the repository's lease first and fails with
`LeaseHeldError` when another process holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
import random
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from scout.v1 import (
    game_pb2,
    ladder_pb2,
    ladder_pb2_grpc,
    nodes_pb2,
    nodes_pb2_grpc,
    owners_pb2_grpc,
)
from scout_arena.ratings import Rating, make_env, rate_table
from scout_arena.record import (
    JSON,
    MatchRecord,
    RecordError,
    record_from_json,
    record_to_json,
    replay,
)
from scout_arena.server import RefereeFacade, TimeControl, TlsConfig

from .matchmaker import (
    Candidate,
    MatchmakerConfig,
    choose_tables,
    unfillable_sizes,
    why_no_table,
)
from .nodes import NodeRegistry, NodeSession, NodesServicer
from .owners_service import OwnersServicer, Registration, VersionValidator
from .repository import (
    BotOwnerError,
    BotRetiredError,
    DuplicateMatchError,
    Lease,
    LeaseLostError,
    MatchStateError,
    Repository,
    SeatResult,
    StorageError,
    echo,
    is_transient,
)

log = logging.getLogger("scout_ladder")

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")

VOID_AT_START = "the ladder died (it was killed or crashed) before the match ended"
VOID_AT_STOP = "the ladder was stopped"
VOID_BEFORE_START = "the ladder was stopped before the match began"
VOID_NODE_NOT_BACK = ("the ladder restarted and no referee node reported the match within "
                      "{seconds:g} s")
REPORT_GRACE_S = 10.0
"""After a node attaches again, how long a match it no longer runs may take to be reported
(a result that ended while the link was down comes right after the welcome)."""
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 5.0


@dataclass(frozen=True)
class ProbationPolicy:
    """A bot whose recent matches are mostly forfeits or timeouts stops being scheduled until
    it reconnects (a fresh process is presumed fixed) or an owner lifts it."""

    window: int = 6
    min_matches: int = 3
    max_bad_share: float = 0.5


@dataclass
class LadderConfig:
    host: str = "127.0.0.1"
    port: int = 50061
    admin_token: str | None = None
    matchmaker: MatchmakerConfig = field(default_factory=MatchmakerConfig)
    time_control: TimeControl = field(default_factory=TimeControl)
    probation: ProbationPolicy = field(default_factory=ProbationPolicy)
    schedule_interval_s: float = 0.2
    reconnect_grace_s: float = 10.0
    rng_seed: int | None = None
    web_host: str = "127.0.0.1"
    web_port: int | None = None
    """Serve the web pages (scout_ladder.web) on this port too; None: no web server."""
    table_warning_after_s: float = 5.0
    """Warn that the connected bots cannot fill any allowed table once that has lasted this
    long (bots connecting one by one after a restart are not worth a warning)."""
    lease_check_s: float = 5.0
    """How often the lease's connection is checked (PostgreSQL); a lost lease stops the
    ladder."""
    tls: TlsConfig | None = None
    """Serve bots, nodes and clients over TLS (the referee's flags: --tls-cert, --tls-key,
    --tls-client-ca)."""
    node_token: str | None = None
    """Serve `Nodes` with this token and play every match on referee nodes (nodes.proto);
    None: the ladder's own referee plays them."""
    node_heartbeat_s: float = 1.0
    node_heartbeat_timeout_s: float = 5.0
    """A node silent this long is lost: its matches are voided, its bots seated elsewhere."""
    join_timeout_s: float = 10.0
    """How long a node waits for an assigned match's bots; a bot not there by then forfeits."""
    node_rejoin_s: float = 20.0
    """After a restart, how long the nodes have to claim the matches left in flight."""
    registration: Registration = Registration.CLOSED
    """Who may sign up for an owner account (`scout.v1.Owners`, owners_service)."""
    version_validator: VersionValidator | None = None
    """Runs uploaded versions (the hosting code); None: the ladder hosts no bots."""


class _GaveUp(Exception):
    """A retried database call was abandoned (the ladder is stopping)."""


@dataclass(eq=False)
class _Flight:
    """A match this process started and has not settled yet."""

    intent_id: str
    """The id its row was written under before the referee started it."""
    match_id: str
    """The referee's id, which the row takes once bound."""
    challenge_id: int | None
    bound: asyncio.Task[None] | None = None
    players: tuple[str, ...] = ()
    node: str | None = None
    """Address of the referee node hosting it; None: the ladder's own referee."""


def _brief(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


class Ladder:
    """Runs the ladder from `start` until `stop`."""

    def __init__(self, repository: Repository, config: LadderConfig) -> None:
        self.repo = repository
        self.config = config
        self.rng = random.Random(config.rng_seed)
        self.env = make_env()
        self.nodes: NodeRegistry | None = None
        services = [(lambda srv: ladder_pb2_grpc.add_LadderServicer_to_server(
            LadderServicer(self), srv), "scout.v1.Ladder")]
        owners = self.owners_servicer = OwnersServicer(
            repository, admin_token=config.admin_token, registration=config.registration,
            validator=config.version_validator)
        services.append((lambda srv: owners_pb2_grpc.add_OwnersServicer_to_server(owners, srv),
                         "scout.v1.Owners"))
        if config.node_token is not None:
            if not config.node_token:
                raise ValueError("the node token is empty: give nodes a secret to attach with")
            nodes = self.nodes = NodeRegistry(config.node_heartbeat_s,
                                              config.node_heartbeat_timeout_s)
            token = config.node_token
            services.append((lambda srv: nodes_pb2_grpc.add_NodesServicer_to_server(
                NodesServicer(nodes, self, token), srv), "scout.v1.Nodes"))
        self.referee = RefereeFacade(
            host=config.host, port=config.port, admin_token=config.admin_token,
            time_control=config.time_control, reconnect_grace_s=config.reconnect_grace_s,
            authenticator=self._authenticate, extra_services=services, tls=config.tls)
        self.referee.on_match_finished(self._match_finished)
        self.referee.on_connect(self._connected)
        if self.nodes is not None:
            registry = self.nodes
            self.referee.add_gauge("scout_ladder_nodes", "Referee nodes attached now.",
                                   lambda: float(len(registry.nodes)))
            self.referee.add_gauge(
                "scout_ladder_node_matches", "Ladder matches assigned to nodes and not ended.",
                lambda: float(sum(len(n.matches) for n in list(registry.nodes.values()))))
        self.ratings: dict[str, Rating] = {}
        self.owners: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.unschedulable: dict[str, str] = {}
        self.idle_since: dict[str, float] = {}
        self.voided_at_start: list[str] = []
        self.stop_requested = asyncio.Event()
        """Set when the ladder must stop on its own (it lost its lease); see `failure`."""
        self.failure: str | None = None
        self._finish_lock = asyncio.Lock()
        self._pending: set[asyncio.Task[Any]] = set()
        self._flights: dict[str, _Flight] = {}
        self._orphans: dict[str, _Flight] = {}
        """After a restart with nodes: matches left in flight that no node has claimed yet."""
        self._node_seats: dict[str, set[str]] = {}
        """Bot -> ladder matches it plays (or is waiting for) on nodes."""
        self._unsettled_intents: set[str] = set()
        self._scheduler: asyncio.Task[None] | None = None
        self._lease_watch: asyncio.Task[None] | None = None
        self._lease: Lease | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._paused = False
        self._nodeless_warned = -1e9
        self._stopped = False
        self._table_problem: tuple[str, float] | None = None
        self._table_warned: str | None = None
        self._web: Any = None
        self._web_task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return self.referee.address

    async def start(self) -> None:
        """Takes the lease (`LeaseHeldError` if another ladder serves the database), migrates,
        voids what a dead predecessor left in flight, and starts serving."""
        self._lease = await asyncio.to_thread(self.repo.acquire_lease)
        referee_started = False
        try:
            await asyncio.to_thread(self.repo.migrate)
            if self.nodes is not None:
                await self._await_nodes_claims()
            else:
                self.voided_at_start = await asyncio.to_thread(self.repo.void_in_flight,
                                                               VOID_AT_START)
            if self.voided_at_start:
                log.warning("voided %d matches that were in flight when the ladder died: %s",
                            len(self.voided_at_start), ", ".join(self.voided_at_start))
            stored = await asyncio.to_thread(self.repo.ratings)
            self.ratings = {name: Rating(r.mu, r.sigma) for name, r in stored.items()}
            await self._refresh_bots()
            self._warn_about_registered_bots()
            await self.referee.start()
            referee_started = True
            await self.owners_servicer.resume_validations()
            if self.config.web_port is not None:
                await self._start_web()
        except BaseException:
            if referee_started:
                with contextlib.suppress(Exception):
                    await self.referee.stop()
            await self._release_lease()
            raise
        self._scheduler = asyncio.create_task(self._schedule_forever(), name="ladder scheduler")
        self._lease_watch = asyncio.create_task(self._watch_lease(), name="ladder lease watch")

    async def _start_web(self) -> None:
        from scout_arena.web import create_app, make_server

        from .web_source import LadderSource

        app = create_app(LadderSource(self.repo), title="Scout Arena ladder",
                         live=self.referee.live_matches,
                         nodes=self.node_report if self.nodes is not None else None)
        self._web = make_server(app, self.config.web_host, self.config.web_port or 0)
        self._web_task = asyncio.create_task(self._web.serve(), name="ladder web")
        while not self._web.started:
            if self._web_task.done():
                await self._web_task
                raise RuntimeError("the web server stopped while starting")
            await asyncio.sleep(0.01)

    @property
    def web_address(self) -> str | None:
        """host:port of the web pages, or None when they are not served."""
        return None if self._web is None else str(self._web.address)

    async def stop(self) -> None:
        """Stops cleanly: no new match, running ones aborted and voided, every result and void
        stored (retrying while the database fails), then the lease released."""
        if self._stopped:
            return
        self._stopping = True
        self._wake.set()
        if self._lease_watch is not None:
            self._lease_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease_watch
        if self._scheduler is not None:
            # Not cancelled: a pass ends between two matches, never between a match's row
            # and its start.
            with contextlib.suppress(Exception):
                await self._scheduler
        try:
            if self._web_task is not None:
                self._web.should_exit = True
                with contextlib.suppress(asyncio.CancelledError):
                    await self._web_task
            try:
                await self.referee.stop()
            except Exception:
                log.exception("the referee did not stop cleanly")
            await self._drain()
            # Whatever is left of our own referee's is over: settle it now, not at next start.
            # Matches on nodes play on; their nodes report them to the next start.
            for flight in list(self._flights.values()):
                if flight.node is None:
                    await self._settle_void(flight, VOID_AT_STOP)
            for intent_id in sorted(self._unsettled_intents):
                with contextlib.suppress(StorageError):
                    await self._db(f"void match {intent_id}", self.repo.void_match, intent_id,
                                   VOID_AT_STOP)
            self._unsettled_intents.clear()
            await self._drain()
        finally:
            await self._release_lease()
        self._stopped = True

    async def _drain(self) -> None:
        """Waits for every pending write (they may spawn more), saying so while it takes."""
        waited = 0.0
        while self._pending:
            done, _ = await asyncio.wait(list(self._pending), timeout=10.0)
            if not done:
                waited += 10.0
                log.warning("stopping: still storing %d results after %.0f s (the database "
                            "is not answering); a second SIGTERM stops at once and leaves "
                            "them in flight", len(self._pending), waited)

    async def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            await asyncio.to_thread(lease.release)

    async def _watch_lease(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.config.lease_check_s)
            lease = self._lease
            if lease is None:
                return
            try:
                await asyncio.to_thread(lease.check)
            except LeaseLostError as exc:
                self.failure = (f"{exc}: stopping, so that no second ladder can serve the "
                                "database next to this one")
                log.critical("%s", self.failure)
                self.stop_requested.set()
                return

    # ----- bots -----------------------------------------------------------------------------

    async def _authenticate(self, token: str) -> str | None:
        bot = await asyncio.to_thread(self.repo.authenticate, token)
        if bot is None or bot.retired:
            return None
        self.owners[bot.name] = bot.owner
        self.versions[bot.name] = bot.version
        return bot.name

    def _connected(self, name: str) -> None:
        self.idle_since.setdefault(name, time.monotonic())
        if name in self.unschedulable and self.unschedulable[name].startswith("probation"):
            self.unschedulable.pop(name)
            self._spawn(self._lift_probation(name), f"lift the probation of {name}")

    async def _lift_probation(self, name: str) -> None:
        await asyncio.to_thread(self.repo.set_probation, name, None)
        log.info("bot %s reconnected: probation lifted", name)

    async def _refresh_bots(self) -> None:
        bots = await asyncio.to_thread(self.repo.list_bots, True)
        unschedulable = {}
        for bot in bots:
            self.owners[bot.name] = bot.owner
            self.versions[bot.name] = bot.version
            reason = bot.unschedulable_reason  # retired, suspended owner, paused, no version
            if reason is not None:
                unschedulable[bot.name] = reason
            elif bot.probation_reason:
                unschedulable[bot.name] = f"probation: {bot.probation_reason}"
        self.unschedulable = unschedulable

    def _warn_about_registered_bots(self) -> None:
        """At start: the table sizes that the registered bots can never fill, and why."""
        bots = {n: o for n, o in self.owners.items() if self.unschedulable.get(n) != "retired"}
        if not bots:
            return
        config = self.config.matchmaker
        why = why_no_table(bots, config)
        if why is not None:
            log.warning("no match can start even with every registered bot connected: %s",
                        why)
            return
        never = unfillable_sizes(bots, config)
        if never:
            owners = len(set(bots.values()))
            log.warning("tables of %s can never be formed: the %d registered bots belong to "
                        "%d owners and a table seats %s; only smaller tables are played",
                        ",".join(map(str, never)), len(bots), owners,
                        "any bots" if config.allow_same_owner else "one bot per owner")

    def _check_tables(self) -> None:
        """Warns (once the situation has lasted a while) when the connected bots cannot fill
        any allowed table, and says so again when they can."""
        connected = {n: self.owners[n] for n in self.referee.connected_bots()
                     if n in self.owners and n not in self.unschedulable}
        problem = why_no_table(connected, self.config.matchmaker) if connected else None
        now = time.monotonic()
        if problem is None:
            if self._table_warned is not None:
                log.warning("the connected bots can fill a table again: matches resume")
            self._table_problem = self._table_warned = None
            return
        if self._table_problem is None or self._table_problem[0] != problem:
            self._table_problem = (problem, now)
        since = self._table_problem[1]
        if problem != self._table_warned and now - since >= self.config.table_warning_after_s:
            log.warning("no match can start: the connected bots cannot fill any allowed table "
                        "size: %s", problem)
            self._table_warned = problem

    # ----- scheduling -----------------------------------------------------------------------

    async def _schedule_forever(self) -> None:
        last_refresh = 0.0
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.schedule_interval_s)
            if self._stopping:
                return
            try:
                if time.monotonic() - last_refresh > 2.0:
                    await self._refresh_bots()
                    last_refresh = time.monotonic()
                self._check_tables()
                await self._schedule_once()
            except Exception:
                log.exception("scheduling pass failed; trying again")

    def _idle_bots(self) -> list[str]:
        node_seats = self._node_seats
        return [name for name, free in self.referee.connected_bots().items()
                if free - len(node_seats.get(name, ())) > 0 and name not in self.unschedulable
                and name in self.owners]

    def _warn_without_nodes(self, idle: int) -> None:
        """With nodes but none attached, nothing can start: say so (every 30 s at most)."""
        now = time.monotonic()
        if idle and now - self._nodeless_warned >= 30.0:
            self._nodeless_warned = now
            log.warning("no referee node is attached: no match can start (%d bots waiting); "
                        "start nodes with `scout-arena referee serve --join %s`", idle,
                        self.address)

    def _room(self) -> int | None:
        """Matches that may start now: the nodes' free capacity; None when unbounded (the
        ladder's own referee plays them)."""
        return None if self.nodes is None else self.nodes.free_capacity()

    def pause(self) -> None:
        """Start no more matches (before the ladder's local nodes are stopped, `stop`)."""
        self._paused = True

    async def _schedule_once(self) -> None:
        if self._paused:
            return
        idle = dict.fromkeys(self._idle_bots())
        if self.nodes is not None and not self.nodes.live():
            self._warn_without_nodes(len(idle))
        if not idle or self._room() == 0:
            return
        for challenge in await asyncio.to_thread(self.repo.open_challenges):
            names = [challenge.bot, *challenge.opponents]
            if all(n in idle for n in names) and not self._stopping and self._room() != 0:
                await self._begin(names, challenge_id=challenge.id)
                for n in names:
                    idle.pop(n, None)
        if not idle:
            return
        now = time.monotonic()
        stored = await asyncio.to_thread(self.repo.ratings)
        candidates = []
        for name in idle:
            rating = self.ratings.get(name, Rating())
            games = stored[name].games if name in stored else 0
            candidates.append(Candidate(name, self.owners.get(name, ""), rating.mu, rating.sigma,
                                        games, now - self.idle_since.get(name, now)))
        # The whole pass's tables at once, off the loop (10,000 idle bots: about 0.5 s).
        rng = random.Random(self.rng.getrandbits(64))
        tables = await asyncio.to_thread(choose_tables, candidates, self.config.matchmaker,
                                         rng, self._room())
        for count, table in enumerate(tables, 1):
            if self._stopping or self._room() == 0:
                return
            await self._begin([c.name for c in table], challenge_id=None)
            if count % 100 == 0:
                await asyncio.sleep(0)  # a pass of thousands of tables lets the loop breathe

    async def _begin(self, names: list[str], challenge_id: int | None) -> None:
        """Start a table: on the ladder's own referee (awaited, one by one), or on a node,
        whose room and bots are reserved now and the rest done in a task of its own, so that
        a pass seats thousands of bots without waiting on each write and reply in turn."""
        if self.nodes is None:
            await self._start(names, challenge_id)
            return
        node = self.nodes.place(names)
        if node is None:
            return
        intent_id = f"m-{secrets.token_hex(8)}"
        node.matches.add(intent_id)
        self._hold_seats(intent_id, names)
        for n in names:
            self.idle_since.pop(n, None)
        self._spawn(self._start_on_node(node, intent_id, names, challenge_id),
                    f"start match {intent_id} on node {node.name}")

    async def _write_intent(self, intent_id: str, names: list[str],
                            challenge_id: int | None) -> int | None:
        """Commit the match's row before it can start (step 1 of the module docstring): its
        seed, or None when the repository refused it (a bot was retired meanwhile) or the
        ladder stopped during the write. Seats are shuffled here."""
        self.rng.shuffle(names)
        seed = self.rng.getrandbits(64)
        seats = [(n, self.versions.get(n, 1)) for n in names]
        try:
            await self._db(f"write match {intent_id} before it starts", self.repo.start_match,
                           intent_id, len(names), seed, seats, challenge_id is None,
                           challenge_id, give_up=lambda: self._stopping)
        except StorageError as exc:  # refused: a bot was retired meanwhile, ...
            log.warning("not starting a match of %s: %s", ", ".join(names), exc)
            return None
        except BaseException:
            # The row may have been written (the answer to its commit was lost): ours to void.
            self._unsettled_intents.add(intent_id)
            if self._stopping:
                return None
            raise
        return seed

    async def _start(self, names: list[str], challenge_id: int | None) -> None:
        """Writes the match, then has the referee start it (see the module docstring)."""
        intent_id = f"m-{secrets.token_hex(8)}"
        seed = await self._write_intent(intent_id, names, challenge_id)
        if seed is None:
            return
        if self._stopping:
            await self._void_intent(intent_id, VOID_BEFORE_START)
            return
        try:
            match_id = self.referee.create_match(names, seed)
        except Exception as exc:  # MatchRequestError: a bot left or filled up meanwhile
            log.info("the referee did not start match %s of %s: %s", intent_id,
                     ", ".join(names), exc)
            await self._void_intent(intent_id, f"the referee did not start it: {_brief(exc)}")
            return
        # Synchronously after create_match: the match cannot have ended yet.
        flight = _Flight(intent_id, match_id, challenge_id)
        self._flights[match_id] = flight
        if match_id != intent_id:
            flight.bound = self._spawn(self._bind(flight), f"bind match {match_id}")
        for n in names:
            self.idle_since.pop(n, None)

    async def _void_intent(self, intent_id: str, reason: str) -> None:
        self._unsettled_intents.add(intent_id)
        await self._db(f"void match {intent_id}", self.repo.void_match, intent_id, reason)
        self._unsettled_intents.discard(intent_id)

    async def _bind(self, flight: _Flight) -> None:
        await self._db(f"bind match {flight.intent_id} to {flight.match_id}",
                       self.repo.bind_match, flight.intent_id, flight.match_id)

    async def _row_id(self, flight: _Flight) -> str:
        """The id the match's row has: the referee's once bound (waits for it), else the
        intent's (a bind that failed for good is logged already)."""
        if flight.bound is None:
            return flight.match_id
        try:
            await asyncio.shield(flight.bound)
        except Exception:
            return flight.intent_id
        return flight.match_id

    # ----- referee nodes --------------------------------------------------------------------

    async def _await_nodes_claims(self) -> None:
        """At start, with nodes: what was in flight may still be playing on a node, or have
        ended there while the ladder was away. Nodes claim theirs as they attach (and report
        what ended); whatever is unclaimed after ``node_rejoin_s`` is voided."""
        in_flight = await asyncio.to_thread(self.repo.in_flight_matches)
        for summary in in_flight:
            players = tuple(seat.bot for seat in sorted(summary.seats, key=lambda s: s.seat))
            self._orphans[summary.match_id] = _Flight(summary.match_id, summary.match_id,
                                                      summary.challenge_id, players=players)
            self._hold_seats(summary.match_id, players)
        if in_flight:
            log.warning("%d matches were in flight when the ladder stopped; waiting %g s for "
                        "their nodes to claim them", len(in_flight), self.config.node_rejoin_s)
            self._spawn(self._void_unclaimed(), "void the matches no node claimed")

    async def _void_unclaimed(self) -> None:
        await asyncio.sleep(self.config.node_rejoin_s)
        reason = VOID_NODE_NOT_BACK.format(seconds=self.config.node_rejoin_s)
        for match_id, flight in list(self._orphans.items()):
            if self._orphans.pop(match_id, None) is None:
                continue
            self._release_seats(match_id, flight.players)
            self.voided_at_start.append(match_id)
            await self._db(f"void match {match_id}", self.repo.void_match, match_id, reason)
        self._wake.set()

    def _hold_seats(self, match_id: str, players: Sequence[str]) -> None:
        for name in players:
            self._node_seats.setdefault(name, set()).add(match_id)

    def _release_seats(self, match_id: str, players: Sequence[str]) -> None:
        now = time.monotonic()
        for name in players:
            seats = self._node_seats.get(name)
            if seats is not None and match_id in seats:
                seats.discard(match_id)
                if not seats:
                    del self._node_seats[name]
                self.idle_since[name] = now
        self._wake.set()

    async def _start_on_node(self, node: NodeSession, intent_id: str, names: list[str],
                             challenge_id: int | None) -> None:
        """Write a match reserved on a node (`_begin`), have the node take it, then tell its
        bots where to play it. Whatever stops it first gives the reservation back."""
        seed = None
        try:
            seed = await self._write_intent(intent_id, names, challenge_id)
        finally:
            if seed is None or self._stopping or not node.alive:
                self._unreserve(node, intent_id, names)
        if seed is None:
            return
        if self._stopping or not node.alive:
            await self._void_intent(intent_id, VOID_BEFORE_START if self._stopping else
                                    f"its referee node {node.name} was lost before it began")
            return
        flight = _Flight(intent_id, intent_id, challenge_id, players=tuple(names),
                         node=node.address)
        self._flights[intent_id] = flight
        tickets = [(n, secrets.token_urlsafe(24)) for n in names]
        tc = self.config.time_control
        reply = await node.assign(intent_id, tickets, seed, game_pb2.TimeControl(
            decision_ms=tc.decision_ms, time_bank_ms=tc.time_bank_ms,
            no_time_bank=tc.time_bank_ms == 0), self.config.join_timeout_s)
        if not reply.accepted:
            if self._flights.pop(intent_id, None) is not None:
                self._unreserve(node, intent_id, names)
                await self._void_intent(intent_id,
                                        f"node {node.name} did not take it: {reply.reason}")
            return
        assert self.nodes is not None
        for name, ticket in tickets:
            self.nodes.last_node[name] = node.address
            if not self.referee.send_assignment(name, intent_id, node.address, ticket,
                                                node.tls):
                log.info("bot %s left before it was told where match %s is played; its seat "
                         "forfeits unless it comes back in time", name, intent_id)

    def _unreserve(self, node: NodeSession, intent_id: str, names: Sequence[str]) -> None:
        node.matches.discard(intent_id)
        self._release_seats(intent_id, names)

    def node_attached(self, node: NodeSession, running: Sequence[str],
                      previous: NodeSession | None) -> None:
        """A node attached: it keeps the matches it still plays (ours, or left in flight by
        our predecessor); any other it plays was voided meanwhile and is cancelled."""
        claimed = set()
        for match_id in running:
            flight = self._flights.get(match_id)
            if flight is None and (flight := self._orphans.pop(match_id, None)) is not None:
                flight.node = node.address
                self._flights[match_id] = flight
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
                self._spawn(self._expect_reports(node, waiting),
                            f"wait for node {node.name}'s reports")
        self._wake.set()

    async def _expect_reports(self, node: NodeSession, match_ids: set[str]) -> None:
        await asyncio.sleep(REPORT_GRACE_S)
        for match_id in sorted(match_ids):
            flight = self._flights.get(match_id)
            if flight is None or flight.node != node.address or match_id not in node.matches:
                continue
            node.matches.discard(match_id)
            self._release_seats(match_id, flight.players)
            await self._settle_void(flight, f"node {node.name} ({node.address}) attached again "
                                            "without it and did not report it")

    def node_lost(self, node: NodeSession, reason: str) -> None:
        """Void what the node was playing and free its bots, who are seated elsewhere (unless
        the ladder is stopping: then the node reports them to the next start)."""
        lost = sorted(node.matches)
        node.matches.clear()
        if self._stopping:
            return
        for match_id in lost:
            flight = self._flights.get(match_id)
            if flight is None or flight.node != node.address:
                continue
            self._release_seats(match_id, flight.players)
            self._spawn(self._settle_void(
                flight, f"its referee node {node.name} ({node.address}) was lost: {reason}"),
                f"void match {match_id}")
        if lost:
            log.warning("voided %d matches of the lost node %s", len(lost), node.name)

    async def node_match_ended(self, node: NodeSession, match_id: str, record_json: str | None,
                               failure: str) -> tuple[bool, str]:
        """Settle what a node reported: rate a finished match once (a repeat or a match voided
        meanwhile is not rated), void one that did not finish."""
        flight = self._flights.get(match_id)
        if flight is None and (flight := self._orphans.pop(match_id, None)) is not None:
            self._flights[match_id] = flight
        if flight is not None and flight.node not in (None, node.address):
            return False, f"match {match_id} is not this node's"
        if flight is not None:
            self._release_seats(match_id, flight.players)
        record: MatchRecord | None = None
        if record_json is not None:
            try:
                record = record_from_json(json.loads(record_json))
                replay(record)
            except (RecordError, ValueError) as exc:
                record, failure = None, f"its record does not replay: {_brief(exc)}"
        if record is not None and flight is not None and tuple(record.players) != flight.players:
            record, failure = None, "its record seats other bots than the ladder assigned"
        if record is None or record.status != "finished" or record.outcome is None:
            why = failure or "it was aborted on the node"
            if flight is not None:
                # Paused: the ladder is stopping its local nodes, which abort what they play.
                await self._settle_void(flight, VOID_AT_STOP if self._paused else
                                        f"node {node.name}: {why}")
            return False, f"not rated: {why}"
        if flight is None:
            return await self._late_report(match_id, record)
        await self._record_result(flight, record)
        return True, "rated"

    async def _late_report(self, match_id: str, record: MatchRecord) -> tuple[bool, str]:
        """A finished match the ladder no longer has in flight: stored already (a repeat), or
        voided before its result came (its record is kept, unrated)."""
        summary = await self._db(f"look up match {match_id}", self.repo.get_match, match_id)
        if summary is None:
            log.error("a node reported match %s, which this ladder never wrote", match_id)
            return False, "unknown match"
        if summary.status != "void" or (summary.seats and summary.seats[0].rank is not None):
            return False, f"already {summary.status}"
        results = _seat_results(record)
        await self._db(f"keep the late record of match {match_id}", self.repo.finish_match,
                       match_id, json.dumps(record_to_json(record)), results, {})
        log.warning("match %s ended after it was voided (%s): its record is kept, it is not "
                    "rated", match_id, summary.void_reason)
        return False, "voided before its result came: kept, not rated"

    def node_report(self) -> list[JSON]:
        """The attached nodes and their load, for the web pages and the CLI."""
        if self.nodes is None:
            return []
        now = time.monotonic()
        return [{"node_id": n.node_id, "name": n.name, "address": n.address,
                 "version": n.version, "capacity": n.capacity,
                 "matches": len(n.matches), "running_matches": n.heartbeat.running_matches,
                 "connected_bots": n.heartbeat.connected_bots,
                 "decisions_per_s": round(n.decisions_per_s(), 1),
                 "rss_mb": round(n.heartbeat.rss_bytes / 2**20, 1),
                 "cpu_s": round(n.heartbeat.cpu_seconds, 1),
                 "heartbeat_age_s": round(now - n.last_heartbeat, 2),
                 "attached_at": n.attached_at}
                for n in sorted(self.nodes.live(), key=lambda n: n.address)]

    # ----- results --------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, T], what: str) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        self._pending.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here, always: never "never retrieved"
        if exc is not None:
            log.error("%s failed: %s", task.get_name(), _brief(exc), exc_info=exc)

    async def _db(self, what: str, fn: Callable[..., T], *args: Any,
                  give_up: Callable[[], bool] | None = None) -> T:
        """``fn(*args)`` in a thread, repeated with backoff for as long as it fails for a
        transient reason (the repository's writes are idempotent, so a repeat is safe even
        when a commit went through and only its answer was lost)."""
        delay = RETRY_FIRST_S
        for attempt in itertools.count(1):
            try:
                return await asyncio.to_thread(fn, *args)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if give_up is not None and give_up():
                    raise _GaveUp(what) from exc
                log.warning("%s failed (attempt %d, next in %.2f s): %s", what, attempt, delay,
                            _brief(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        raise AssertionError("unreachable")

    def _match_finished(self, record: MatchRecord) -> None:
        now = time.monotonic()
        for name in record.players:
            self.idle_since[name] = now
        flight = self._flights.get(record.match_id or "")
        if flight is None:
            log.error("the referee reported match %s, which this ladder did not start",
                      record.match_id)
            return
        if record.status == "finished" and record.outcome is not None:
            self._spawn(self._record_result(flight, record),
                        f"store the result of match {flight.match_id}")
        else:
            reason = VOID_AT_STOP if self._stopping else \
                "the referee aborted it before it ended (see the ladder's log)"
            self._spawn(self._settle_void(flight, reason), f"void match {flight.match_id}")

    async def _settle_void(self, flight: _Flight, reason: str) -> None:
        row_id = await self._row_id(flight)
        await self._db(f"void match {row_id}", self.repo.void_match, row_id, reason)
        self._flights.pop(flight.match_id, None)

    async def _record_result(self, flight: _Flight, record: MatchRecord) -> None:
        outcome = record.outcome
        assert outcome is not None
        rated = flight.challenge_id is None
        results = _seat_results(record)
        record_json = json.dumps(record_to_json(record))
        row_id = await self._row_id(flight)
        async with self._finish_lock:
            updates: dict[str, tuple[float, float]] = {}
            if rated:
                before = [self.ratings.get(n, Rating()) for n in record.players]
                after = rate_table(self.env, before, outcome.ranks)
                updates = {n: (r.mu, r.sigma) for n, r in zip(record.players, after, strict=True)}
            try:
                summary = await self._db(f"store the result of match {row_id}",
                                         self.repo.finish_match, row_id, record_json, results,
                                         updates)
            except Exception as exc:
                # Not transient: it would fail again. Say so in the row, not only in the log.
                log.error("could not store the result of match %s: %s", row_id, _brief(exc),
                          exc_info=exc)
                self._flights.pop(flight.match_id, None)
                await self._db(f"void match {row_id}", self.repo.void_match, row_id,
                               f"the ladder could not store its result: {_brief(exc)}")
                return
            if summary.status == "finished":
                for n, (mu, sigma) in updates.items():
                    self.ratings[n] = Rating(mu, sigma)
            else:
                log.warning("match %s ended after it was voided (%s): its record is kept, it "
                            "is not rated", row_id, summary.void_reason)
        self._flights.pop(flight.match_id, None)
        for result in results:
            # A clean seat only lowers the bot's bad share: its check can wait for a bad one.
            if not (result.forfeited or result.timeouts):
                continue
            try:
                await self._check_probation(result.bot)
            except Exception as exc:
                log.warning("probation check of %s failed: %s", result.bot, _brief(exc))

    async def _check_probation(self, name: str) -> None:
        policy = self.config.probation
        recent = await asyncio.to_thread(self.repo.recent_seat_results, name, policy.window)
        if len(recent) < policy.min_matches:
            return
        bad = sum(1 for r in recent if r.forfeited or r.timeouts > 0)
        if bad / len(recent) >= policy.max_bad_share and name not in self.unschedulable:
            reason = (f"{bad} of its last {len(recent)} matches had timeouts or forfeits; "
                      "it is scheduled again once it reconnects")
            self.unschedulable[name] = f"probation: {reason}"
            await asyncio.to_thread(self.repo.set_probation, name, reason)
            log.warning("bot %s on probation: %s", name, reason)


def _seat_results(record: MatchRecord) -> list[SeatResult]:
    """Each seat's result of a finished match, as the repository stores it."""
    outcome = record.outcome
    assert outcome is not None
    return [SeatResult(seat=i, bot=name, score=outcome.totals[i], rank=outcome.ranks[i],
                       forfeited=i in outcome.forfeits, timeouts=outcome.seats[i].timeouts,
                       illegal_actions=outcome.seats[i].illegal_actions)
            for i, name in enumerate(outcome.players)]


def _cancel(match_id: str, reason: str) -> nodes_pb2.LadderMessage:
    return nodes_pb2.LadderMessage(cancel=nodes_pb2.CancelMatch(match_id=match_id, reason=reason))


def _summary(bot: Any) -> ladder_pb2.BotSummary:
    return ladder_pb2.BotSummary(name=bot.name, owner=bot.owner, version=bot.version,
                                 retired=bot.retired, probation_reason=bot.probation_reason or "",
                                 kind=bot.kind, paused_reason=bot.paused_reason or "",
                                 suspended_reason=bot.suspended_reason or "")


MESSAGE_LIMIT = 300
"""Longest status message the Ladder service sends (a message echoing a huge request would not
fit in the status trailer, and the client would see RESOURCE_EXHAUSTED instead)."""


def _bounded(message: str) -> str:
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "..."


def _status_of(exc: Exception) -> tuple[grpc.StatusCode, str] | None:
    """The status a repository error becomes (see docs/PROTOCOL.md, the Ladder service)."""
    if isinstance(exc, KeyError):  # UnknownBotError, UnknownMatchError, UnknownChallengeError
        return grpc.StatusCode.NOT_FOUND, f"not found: {str(exc) or 'no such thing'}"
    if isinstance(exc, BotOwnerError | DuplicateMatchError):
        return grpc.StatusCode.ALREADY_EXISTS, str(exc)
    if isinstance(exc, BotRetiredError):
        return grpc.StatusCode.FAILED_PRECONDITION, f"{exc} is retired"
    if isinstance(exc, MatchStateError):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, ValueError):  # InvalidInputError
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if is_transient(exc):
        return (grpc.StatusCode.UNAVAILABLE,
                "the ladder's database is not answering; try again shortly")
    return None


class LadderServicer(ladder_pb2_grpc.LadderServicer):
    """The public ladder API over the same repository the CLI and web pages read."""

    def __init__(self, ladder: Ladder) -> None:
        self.ladder = ladder

    @property
    def repo(self) -> Repository:
        return self.ladder.repo

    async def _admin(self, context: Context) -> None:
        token = self.ladder.config.admin_token
        if token is None:
            return
        given = RefereeFacade.bearer_token(context)
        # Constant time, on bytes (compare_digest refuses str that is not ASCII).
        if not hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8")):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "this call needs 'authorization: Bearer <admin token>'")

    async def _call(self, context: Context, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except Exception as exc:
            status = _status_of(exc)
            if status is None:
                log.error("Ladder call %s failed", getattr(fn, "__name__", fn), exc_info=exc)
                status = (grpc.StatusCode.INTERNAL,
                          "the ladder failed on this call; its log has the details")
        await context.abort(status[0], _bounded(status[1]))
        raise AssertionError("abort returned")

    async def RegisterBot(self, request: ladder_pb2.RegisterBotRequest,
                          context: Context) -> ladder_pb2.RegisterBotResponse:
        await self._admin(context)
        bot, token = await self._call(context, self.repo.register_bot, request.name,
                                      request.owner)
        return ladder_pb2.RegisterBotResponse(bot=_summary(bot), token=token)

    async def RetireBot(self, request: ladder_pb2.RetireBotRequest,
                        context: Context) -> ladder_pb2.BotSummary:
        await self._admin(context)
        bot = await self._call(context, self.repo.retire_bot, request.name)
        return _summary(bot)

    async def GetLeaderboard(self, request: ladder_pb2.GetLeaderboardRequest,
                             context: Context) -> ladder_pb2.Leaderboard:
        rows = await self._call(context, self.repo.leaderboard)
        return ladder_pb2.Leaderboard(entries=[_entry(row) for row in rows])

    async def GetBotProfile(self, request: ladder_pb2.GetBotProfileRequest,
                            context: Context) -> ladder_pb2.BotProfile:
        profile = await self._call(context, self.repo.bot_profile, request.name)
        if profile is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no bot named {echo(request.name)}")
        return _profile(profile)

    async def ListLadderMatches(
            self, request: ladder_pb2.ListLadderMatchesRequest, context: Context
    ) -> ladder_pb2.ListLadderMatchesResponse:
        matches = await self._call(context, self.repo.list_matches, request.bot or None,
                                   request.table_size or None, request.limit or 50)
        return ladder_pb2.ListLadderMatchesResponse(matches=[_match(m) for m in matches])

    async def GetLadderRecord(self, request: ladder_pb2.GetLadderRecordRequest,
                              context: Context) -> ladder_pb2.GetLadderRecordResponse:
        record = await self._call(context, self.repo.get_record, request.match_id)
        if record is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"no finished match with id {echo(request.match_id)}")
        return ladder_pb2.GetLadderRecordResponse(record_json=record)

    async def Challenge(self, request: ladder_pb2.ChallengeRequest,
                        context: Context) -> ladder_pb2.ChallengeResponse:
        bot = await self._call(context, self.repo.authenticate,
                               RefereeFacade.bearer_token(context))
        if bot is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "a challenge is made with the challenging bot's own token")
        assert bot is not None
        if not 1 <= len(request.opponents) <= 4 or not 1 <= request.games <= 1000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "a challenge names 1 to 4 opponents and 1 to 1000 games")
        challenge = await self._call(context, self.repo.create_challenge, bot.owner,
                                     bot.name, list(request.opponents), request.games)
        return ladder_pb2.ChallengeResponse(challenge_id=challenge.id)


def _entry(row: Any) -> ladder_pb2.LeaderboardEntry:
    return ladder_pb2.LeaderboardEntry(
        rank=row.rank, bot=ladder_pb2.BotSummary(name=row.bot, owner=row.owner),
        mu=row.mu, sigma=row.sigma, conservative=row.conservative, games=row.games,
        recent_ranks=list(row.recent_ranks))


def _match(m: Any) -> ladder_pb2.LadderMatch:
    return ladder_pb2.LadderMatch(
        match_id=m.match_id, status=m.status, table_size=m.table_size, rated=m.rated,
        seats=[ladder_pb2.LadderSeat(seat=s.seat, bot=s.bot, version=s.bot_version,
                                     score=s.score or 0, rank=s.rank or 0,
                                     forfeited=bool(s.forfeited)) for s in m.seats],
        finished_at=m.finished_at.isoformat() if m.finished_at else "",
        void_reason=m.void_reason or "")


def _profile(p: Any) -> ladder_pb2.BotProfile:
    return ladder_pb2.BotProfile(
        bot=_summary(p.bot),
        history=[ladder_pb2.RatingPoint(match_id=h.match_id, mu=h.mu, sigma=h.sigma)
                 for h in p.history],
        timeouts=p.timeouts, forfeits=p.forfeits,
        recent_matches=[_match(m) for m in p.recent_matches])
