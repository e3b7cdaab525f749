"""The ladder: its referee, its scheduler and its gRPC `Ladder` service, on one event loop.

Storage goes through `Repository` only, always via ``asyncio.to_thread`` so no database call
blocks the loop. Results are rated and committed one at a time under a lock, in the order the
matches finish; `recompute` replays that same order, so the stored ratings can be checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from scout.v1 import ladder_pb2, ladder_pb2_grpc
from scout_arena.ratings import Rating, make_env, rate_table
from scout_arena.record import MatchRecord, record_to_json
from scout_arena.server import RefereeFacade, TimeControl

from .matchmaker import Candidate, MatchmakerConfig, choose_table
from .repository import Repository

log = logging.getLogger("scout_ladder")

Context = grpc.aio.ServicerContext[Any, Any]


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


class Ladder:
    """Runs the ladder until `stop`."""

    def __init__(self, repository: Repository, config: LadderConfig) -> None:
        self.repo = repository
        self.config = config
        self.rng = random.Random(config.rng_seed)
        self.env = make_env()
        self.referee = RefereeFacade(
            host=config.host, port=config.port, admin_token=config.admin_token,
            time_control=config.time_control, reconnect_grace_s=config.reconnect_grace_s,
            authenticator=self._authenticate,
            extra_services=[(lambda srv: ladder_pb2_grpc.add_LadderServicer_to_server(
                LadderServicer(self), srv), "scout.v1.Ladder")])
        self.referee.on_match_finished(self._match_finished)
        self.referee.on_connect(self._connected)
        self.ratings: dict[str, Rating] = {}
        self.owners: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.unschedulable: dict[str, str] = {}
        self.idle_since: dict[str, float] = {}
        self.match_kinds: dict[str, int | None] = {}
        self.voided_at_start: list[str] = []
        self._finish_lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()
        self._scheduler: asyncio.Task[None] | None = None
        self._stopping = False
        self._web: Any = None
        self._web_task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return self.referee.address

    async def start(self) -> None:
        await asyncio.to_thread(self.repo.migrate)
        self.voided_at_start = await asyncio.to_thread(
            self.repo.void_in_flight, "the ladder stopped while the match was being played")
        if self.voided_at_start:
            log.warning("voided %d matches that were in flight when the ladder last stopped: %s",
                        len(self.voided_at_start), ", ".join(self.voided_at_start))
        stored = await asyncio.to_thread(self.repo.ratings)
        self.ratings = {name: Rating(r.mu, r.sigma) for name, r in stored.items()}
        await self._refresh_bots()
        await self.referee.start()
        if self.config.web_port is not None:
            await self._start_web()
        self._scheduler = asyncio.create_task(self._schedule_forever(), name="ladder scheduler")

    async def _start_web(self) -> None:
        from scout_arena.web import create_app, make_server

        from .web_source import LadderSource

        app = create_app(LadderSource(self.repo), title="Scout Arena ladder",
                         live=self.referee.live_matches)
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
        self._stopping = True
        if self._scheduler is not None:
            self._scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scheduler
        if self._web_task is not None:
            self._web.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._web_task
        await self.referee.stop()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

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
            self._spawn(self._lift_probation(name))

    async def _lift_probation(self, name: str) -> None:
        await asyncio.to_thread(self.repo.set_probation, name, None)
        log.info("bot %s reconnected: probation lifted", name)

    async def _refresh_bots(self) -> None:
        bots = await asyncio.to_thread(self.repo.list_bots, True)
        unschedulable = {}
        for bot in bots:
            self.owners[bot.name] = bot.owner
            self.versions[bot.name] = bot.version
            if bot.retired:
                unschedulable[bot.name] = "retired"
            elif bot.probation_reason:
                unschedulable[bot.name] = f"probation: {bot.probation_reason}"
        self.unschedulable = unschedulable

    # ----- scheduling -----------------------------------------------------------------------

    async def _schedule_forever(self) -> None:
        last_refresh = 0.0
        while not self._stopping:
            await asyncio.sleep(self.config.schedule_interval_s)
            try:
                if time.monotonic() - last_refresh > 2.0:
                    await self._refresh_bots()
                    last_refresh = time.monotonic()
                await self._schedule_once()
            except Exception:
                log.exception("scheduling pass failed; trying again")

    def _idle_bots(self) -> list[str]:
        return [name for name, free in self.referee.connected_bots().items()
                if free > 0 and name not in self.unschedulable and name in self.owners]

    async def _schedule_once(self) -> None:
        idle = dict.fromkeys(self._idle_bots())
        for challenge in await asyncio.to_thread(self.repo.open_challenges):
            names = [challenge.bot, *challenge.opponents]
            if all(n in idle for n in names):
                await self._start(names, challenge_id=challenge.id)
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
        while True:
            table = choose_table(candidates, self.config.matchmaker, self.rng)
            if table is None:
                return
            names = [c.name for c in table]
            await self._start(names, challenge_id=None)
            chosen = set(names)
            candidates = [c for c in candidates if c.name not in chosen]

    async def _start(self, names: list[str], challenge_id: int | None) -> None:
        self.rng.shuffle(names)
        seed = self.rng.getrandbits(64)
        match_id = self.referee.create_match(names, seed)
        self.match_kinds[match_id] = challenge_id
        await asyncio.to_thread(
            self.repo.start_match, match_id, len(names), seed,
            [(n, self.versions.get(n, 1)) for n in names], challenge_id is None, challenge_id)
        for n in names:
            self.idle_since.pop(n, None)

    # ----- results --------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def _match_finished(self, record: MatchRecord) -> None:
        now = time.monotonic()
        for name in record.players:
            self.idle_since[name] = now
        if record.status == "finished":
            self._spawn(self._record_result(record))

    async def _record_result(self, record: MatchRecord) -> None:
        from .repository import SeatResult

        outcome = record.outcome
        assert record.match_id is not None and outcome is not None
        match_id = record.match_id
        challenge_id = self.match_kinds.pop(match_id, None)
        rated = challenge_id is None
        results = [SeatResult(seat=i, bot=name, score=outcome.totals[i], rank=outcome.ranks[i],
                              forfeited=i in outcome.forfeits,
                              timeouts=outcome.seats[i].timeouts,
                              illegal_actions=outcome.seats[i].illegal_actions)
                   for i, name in enumerate(outcome.players)]
        async with self._finish_lock:
            updates: dict[str, tuple[float, float]] = {}
            if rated:
                before = [self.ratings.get(n, Rating()) for n in record.players]
                after = rate_table(self.env, before, outcome.ranks)
                updates = {n: (r.mu, r.sigma) for n, r in zip(record.players, after, strict=True)}
            await asyncio.to_thread(self.repo.finish_match, match_id,
                                    json.dumps(record_to_json(record)), results, updates)
            for n, (mu, sigma) in updates.items():
                self.ratings[n] = Rating(mu, sigma)
            if challenge_id is not None:
                await asyncio.to_thread(self.repo.challenge_played, challenge_id)
        for name in record.players:
            await self._check_probation(name)

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


def _summary(bot: Any) -> ladder_pb2.BotSummary:
    return ladder_pb2.BotSummary(name=bot.name, owner=bot.owner, version=bot.version,
                                 retired=bot.retired, probation_reason=bot.probation_reason or "")


class LadderServicer(ladder_pb2_grpc.LadderServicer):
    """The public ladder API over the same repository the CLI and web pages read."""

    def __init__(self, ladder: Ladder) -> None:
        self.ladder = ladder

    @property
    def repo(self) -> Repository:
        return self.ladder.repo

    async def _admin(self, context: Context) -> None:
        token = self.ladder.config.admin_token
        if token is not None and RefereeFacade.bearer_token(context) != token:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "this call needs 'authorization: Bearer <admin token>'")

    async def _call(self, context: Context, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except KeyError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc.args[0]) if exc.args else
                                "not found")
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    async def RegisterBot(self, request: ladder_pb2.RegisterBotRequest,
                          context: Context) -> ladder_pb2.RegisterBotResponse:
        await self._admin(context)
        bot, token = await self._call(context, self.repo.register_bot, request.name,
                                      request.owner)
        return ladder_pb2.RegisterBotResponse(bot=_summary(bot), token=token)

    async def RetireBot(self, request: ladder_pb2.RetireBotRequest,
                        context: Context) -> ladder_pb2.BotSummary:
        await self._admin(context)
        await self._call(context, self.repo.retire_bot, request.name)
        bot = await self._call(context, self.repo.get_bot, request.name)
        return _summary(bot)

    async def GetLeaderboard(self, request: ladder_pb2.GetLeaderboardRequest,
                             context: Context) -> ladder_pb2.Leaderboard:
        rows = await self._call(context, self.repo.leaderboard)
        return ladder_pb2.Leaderboard(entries=[_entry(row) for row in rows])

    async def GetBotProfile(self, request: ladder_pb2.GetBotProfileRequest,
                            context: Context) -> ladder_pb2.BotProfile:
        profile = await self._call(context, self.repo.bot_profile, request.name)
        if profile is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no bot named {request.name!r}")
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
                                f"no finished match with id {request.match_id!r}")
        return ladder_pb2.GetLadderRecordResponse(record_json=record)

    async def Challenge(self, request: ladder_pb2.ChallengeRequest,
                        context: Context) -> ladder_pb2.ChallengeResponse:
        bot = await asyncio.to_thread(self.repo.authenticate,
                                      RefereeFacade.bearer_token(context))
        if bot is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "a challenge is made with the challenging bot's own token")
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
