"""Hosting on the ladder: everything hosted bots need, in one place the ladder plugs in.

- **Who plays**: `HostedBots` (hosted.py) is one more source of players for the roster:
  hosted bots with an active version, not paused, owner not suspended, not busy.
- **Where**: a table with a hosted seat is played only where a sandbox runs: on the ladder's
  own referee when it plays its matches itself and can host (`start_here`), or on a node that
  said it can host (`node_accepts`; the seats carry `hosted_seats`).
- **After**: every run's report (from the local `Host`, or a node's `ReportHostedRun`) goes to
  `HostedBots.run_ended`: output stored for the owner, data folder kept, failures counted
  (3 in a row pause the bot).
- **Before**: new versions are checked by `ValidationQueue` (the Owners service's
  `VersionValidator`) on a referee of their own.

A ladder whose machine cannot run the sandbox (`scout_arena.sandbox.probe`) still takes
uploads and validates nothing: it says so at start; its nodes may still host.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scout.v1 import nodes_pb2
from scout_arena.hosting import CodeCache, Host, HostedBot, RunReport
from scout_arena.hosting.validation import ValidationConfig, Validator
from scout_arena.sandbox import Sandbox, probe
from scout_arena.server import RefereeFacade
from scout_rules.protocol import TimeControl

from .flight import VOID_BEFORE_START, Flight, MatchFlights, new_intent_id
from .hosted import DATA_LIMIT_BYTES, BotRow, HostedBots, HostedVersion
from .placement import LocalPlacement
from .roster import PlayerSource
from .validating import ValidationQueue

log = logging.getLogger("scout_ladder.hosted")


class HostingRepository(Protocol):
    """The repository calls hosting makes (the owners' tables)."""

    def upload_path(self, name: str, version: int) -> Path: ...

    def data_dir(self, name: str, *, as_owner: str | None = None) -> Path: ...

    def record_hosted_run(self, name: str, match_id: str, version: int, outcome_reason: str,
                          output_tail: str) -> object: ...

    def set_paused(self, name: str, reason: str | None) -> object: ...

    def get_version(self, name: str, version: int | None, *,
                    as_owner: str | None) -> HostedVersion: ...

    def finish_validation(self, name: str, version: int, *, passed: bool, reason: str,
                          output: str) -> object: ...


class NodeLike(Protocol):
    @property
    def can_host(self) -> bool: ...


@dataclass(frozen=True)
class HostingConfig:
    workdir: Path | None = None
    """Where hosting keeps its working files (unpacked code, runs, checks); None: a new
    temporary folder."""
    data_limit_bytes: int = DATA_LIMIT_BYTES
    validation_matches: int = 2
    join_timeout_s: float = 20.0


class LadderHosting:
    """The ladder's hosting, from `start` to `stop`."""

    def __init__(self, repo: HostingRepository, time_control: TimeControl,
                 config: HostingConfig, *, on_nodes: bool) -> None:
        self.repo = repo
        self._referee: RefereeFacade | None = None
        self.time_control = time_control
        self.config = config
        self.on_nodes = on_nodes
        self.support = probe()
        self._temporary = config.workdir is None
        self.workdir = config.workdir or Path(tempfile.mkdtemp(prefix="scout-ladder-hosting-"))
        self.hosted = HostedBots(repo, data_limit_bytes=config.data_limit_bytes)
        self.validator = Validator(Sandbox(), self.workdir / "validation", ValidationConfig(
            matches=config.validation_matches, time_control=time_control,
            join_timeout_s=config.join_timeout_s))
        self.queue = ValidationQueue(repo, self.validator)
        self.cache = CodeCache(self.workdir / "code")
        self.local: Host | None = None
        self._versions: dict[tuple[str, int], HostedVersion] = {}
        self.held_here: dict[str, tuple[str, ...]] = {}
        """Matches with hosted seats held on the ladder's own referee until their bots
        connect -> their players: the remote ones' seats are reserved meanwhile (the referee
        seats them only once the match starts)."""
        self._flights: MatchFlights | None = None

    @property
    def referee(self) -> RefereeFacade:
        if self._referee is None:
            raise RuntimeError("bind the ladder's referee first")
        return self._referee

    def bind(self, referee: RefereeFacade) -> None:
        """The ladder's referee (made after the services, which need the hosted bots)."""
        self._referee = referee

    @property
    def hosts_here(self) -> bool:
        """The ladder's own referee runs hosted seats."""
        return self.local is not None

    async def start(self) -> None:
        if not self.support.available:
            log.warning("this machine cannot run the sandbox (%s): no version is validated "
                        "here and hosted bots play only on nodes that can host",
                        self.support.reason)
        else:
            await self.queue.start()
            if not self.on_nodes:
                self.local = Host(self.referee.core, Sandbox(), self.workdir / "host",
                                  on_report=self._local_report,
                                  data_limit_bytes=self.config.data_limit_bytes)
        self.referee.on_match_finished(lambda record: self.hosted.match_over(
            record.match_id or "", record.players))
        self.referee.on_hosting_failed(self._not_started)

    async def stop(self) -> None:
        await self.queue.stop()
        if self.local is not None:
            await self.local.close()
        if self._temporary:
            await asyncio.to_thread(shutil.rmtree, self.workdir, True)

    def submit(self, bot: str, version: int) -> None:
        """`submissions.VersionValidator`: check a stored version."""
        if not self.support.available:
            log.warning("%s version %d stays validating: this ladder cannot run the sandbox",
                        bot, version)
            return
        self.queue.submit(bot, version)

    @property
    def unavailable(self) -> str:
        """`submissions.VersionValidator`: why this ladder cannot validate ("" if it can)."""
        return "" if self.support.available else self.support.reason

    # ----- who plays -------------------------------------------------------------------------

    async def refresh(self, bots: Sequence[BotRow]) -> None:
        """The roster's bots as just read: know the hosted ones' active versions."""
        versions: dict[str, HostedVersion] = {}
        for bot in bots:
            if bot.kind != "hosted" or bot.version < 1:
                continue
            key = (bot.name, bot.version)
            version = self._versions.get(key)
            if version is None:
                try:
                    version = await asyncio.to_thread(self.repo.get_version, bot.name,
                                                      bot.version, as_owner=None)
                except Exception as exc:
                    log.warning("cannot read %s version %d: %s", bot.name, bot.version, exc)
                    continue
                self._versions[key] = version
            versions[bot.name] = version
        self.hosted.refresh(bots, versions)

    def free_seats(self) -> dict[str, int]:
        """`roster.PlayerSource`: the hosted bots that can take a seat now, where some
        referee can run them."""
        if not self.hosts_here and not self.on_nodes:
            return {}
        return dict.fromkeys(self.hosted.idle(), 1)

    def is_hosted(self, name: str) -> bool:
        return self.hosted.is_hosted(name)

    def node_accepts(self, names: Sequence[str], node: NodeLike) -> bool:
        """A table with a hosted seat goes only to a node that can host."""
        return node.can_host or not any(self.hosted.is_hosted(n) for n in names)

    # ----- matches -------------------------------------------------------------------------

    def seat(self, match_id: str, names: Sequence[str]) -> dict[str, nodes_pb2.HostedSeat]:
        """The match's hosted seats are taken (busy until reported); what a node needs to run
        them."""
        hosted = self.hosted.seat(match_id, names)
        return {name: self.hosted.seat_message(name) for name in hosted}

    def unseat(self, match_id: str, names: Sequence[str]) -> None:
        self.hosted.unseat(match_id, names)

    async def start_here(self, match_id: str, names: Sequence[str], seed: int,
                         join_timeout_s: float) -> None:
        """Hold a match with hosted seats on the ladder's own referee and start them: the
        remote bots are connected here already, the hosted ones connect through their
        sockets. Raises `MatchRequestError` when the referee cannot hold it."""
        assert self.local is not None
        hosted = [n for n in names if self.hosted.is_hosted(n)]
        self.referee.host_match(match_id, [(n, secrets.token_urlsafe(24)) for n in names],
                                seed, self.time_control, join_timeout_s=join_timeout_s)
        bots = []
        for name in hosted:
            try:
                bots.append(await self._bot(name))
            except Exception as exc:
                log.error("cannot prepare hosted bot %s for match %s: %s", name, match_id, exc)
        await self.local.start(match_id, bots)

    async def _bot(self, name: str) -> HostedBot:
        entry = self.hosted.entries[name]
        cached = self.cache.get(entry.code_sha256)
        if cached is None:
            archive = await asyncio.to_thread(self.hosted.code, name)
            cached = await asyncio.to_thread(self.cache.put, entry.code_sha256, archive)
        data = await asyncio.to_thread(self.hosted.data, name)
        return HostedBot(name, cached[0], cached[1], data)

    async def _local_report(self, report: RunReport) -> None:
        await self.hosted.run_ended(report)

    # ----- the ladder's seams --------------------------------------------------------------

    async def begin_here(self, flights: MatchFlights, names: list[str],
                         challenge_id: int | None) -> None:
        """A table with hosted seats on the ladder's own referee: its row first (as every
        match), then the match held until its bots are connected (`start_here`)."""
        self._flights = flights
        intent_id = new_intent_id()
        self.hosted.seat(intent_id, names)
        self.held_here[intent_id] = tuple(names)
        try:
            await self._begin_here(flights, intent_id, names, challenge_id)
        finally:
            if intent_id not in self.referee.core.assigned.pending:
                self.held_here.pop(intent_id, None)

    async def _begin_here(self, flights: MatchFlights, intent_id: str, names: list[str],
                          challenge_id: int | None) -> None:
        seed = await flights.write_intent(intent_id, names, challenge_id)
        if seed is None or flights.flags.stopping:
            self.unseat(intent_id, names)
            if seed is not None:
                await flights.void_intent(intent_id, VOID_BEFORE_START)
            return
        flights.flights[intent_id] = Flight(intent_id, intent_id, challenge_id,
                                            players=tuple(names))
        try:
            await self.start_here(intent_id, names, seed, self.config.join_timeout_s)
        except Exception as exc:  # MatchRequestError: the referee is closing, ...
            flights.flights.pop(intent_id, None)
            self.unseat(intent_id, names)
            await flights.void_intent(intent_id, f"the referee did not start it: {exc}")
            return
        flights.roster.seated(names)

    def reserved(self) -> dict[str, set[str]]:
        """Bot -> held local matches with hosted seats that have not started yet."""
        pending = self.referee.core.assigned.pending
        for match_id in [m for m in self.held_here if m not in pending]:
            del self.held_here[match_id]
        held: dict[str, set[str]] = {}
        for match_id, names in self.held_here.items():
            for name in names:
                held.setdefault(name, set()).add(match_id)
        return held

    def _not_started(self, match_id: str, why: str) -> None:
        """A held local match could not start (a remote bot filled up meanwhile, ...): void
        it, and free its hosted bots (their runs are reported as they stop)."""
        self.held_here.pop(match_id, None)
        flights = self._flights
        flight = None if flights is None else flights.flights.get(match_id)
        if flights is None or flight is None:
            return
        flights.background.spawn(flights.settle_void(flight, f"the referee could not start "
                                                             f"it: {why}"),
                                 f"void match {match_id}")

    def node_match_over(self, match_id: str) -> None:
        """A match on a node ended or was lost: its hosted bots are freed by their reports,
        or after a while."""
        self.hosted.match_over(match_id, [n for n, m in self.hosted.busy.items()
                                          if m == match_id])


class HostingPlacement:
    """The ladder's own referee as the place of every match (`placement.LocalPlacement`),
    tables with hosted seats held there until their bots connect."""

    def __init__(self, inner: LocalPlacement, hosting: LadderHosting) -> None:
        self.inner = inner
        self.hosting = hosting

    def room(self) -> int | None:
        return self.inner.room()

    def held(self) -> Mapping[str, Set[str]]:
        return self.hosting.reserved()

    def notice_idle(self, idle: int) -> None:
        self.inner.notice_idle(idle)

    async def begin(self, names: list[str], challenge_id: int | None) -> None:
        if any(self.hosting.is_hosted(n) for n in names):
            if self.hosting.hosts_here:
                await self.hosting.begin_here(self.inner.flights, names, challenge_id)
            return
        await self.inner.begin(names, challenge_id)


class RemoteOnly:
    """The bots connected to the ladder's referee, but the hosted ones (whose sockets reach
    that referee too: they are seated through `LadderHosting.free_seats` alone)."""

    def __init__(self, inner: PlayerSource, hosting: LadderHosting) -> None:
        self.inner = inner
        self.hosting = hosting

    def free_seats(self) -> Mapping[str, int]:
        return {n: free for n, free in self.inner.free_seats().items()
                if not self.hosting.is_hosted(n)}
