"""Soak benchmark: many bots, each on its own TCP connection, and matches kept running for a while.

Run as ``.venv/bin/python bench/soak.py --json bench/results/soak.json`` (defaults: 2,000 bots,
200 concurrent 4-player matches, 60 s); the large run is ``--bots 10000 --matches 300``.

A real referee process (``scout-arena referee serve``, bot tokens from a ``--tokens`` file,
records written to a temporary folder) and ``--bot-procs`` client processes (this script in a
child mode) holding the ``--bots`` bots between them. Every bot is one ``grpc.aio`` channel of its
own, created with ``("grpc.use_local_subchannel_pool", 1)`` so that it has its own TCP connection
(channels with equal options would share one, see ../shared/grpc-notes.md), with one Play stream
and ``max_concurrent_matches: 1``. Every process raises RLIMIT_NOFILE to its hard limit first (the
referee inherits the driver's). A bot answers at once with its first legal action (rotation: no;
turn: the first legal Show, else the first legal Scout), like bench/trivial_bot.py.

This process connects nothing itself but an organiser channel: once every bot is connected it
measures the referee idle, then keeps ``--matches`` matches of ``--players`` bots running for
``--seconds``: each match is created with ``Matches.CreateMatch`` (time control ``--decision-ms``
/ ``--time-bank-ms``) from bots that are idle, and whenever one ends (the client holding seat 0
reports its MatchEnded on stdout) its bots go back to the idle pool and another match is
created (with ``--create-batch B``, matches are made B at a time by ``Matches.CreateMatches``,
and topped up the same way as they end: grpc.aio accepts the calls of one method one event-loop
round trip at a time, so a busy referee takes single CreateMatch calls in at only ~10 a second,
fewer than its matches end). Then it stops creating, lets the running matches finish
(``--drain-seconds`` at most), checks health and reads every finished record.

Reported:

* connect time for all bots (first client started -> last Welcome), and the referee's sockets;
* the referee's RSS idle (after connecting, before any match), at peak (VmHWM, and the highest
  sample), and growth per finished match: the slope of a least-squares line of RSS against the
  number of finished matches, over the samples (every 0.5 s) taken from the first finished match
  to the end of the window; and, when more than 1,000 + 200 matches finished, the RSS after the
  first 1,000 against the RSS after the last, per match in between;
* decisions/s: turn answers accepted (bot side) in the window / window length;
* bot-side latency p50/p99 as the AnswerResult round trip: from just before a bot writes its
  ActionChoice to its reading the AnswerResult for it; and the bot's own time, from reading the
  DecisionRequest to writing the answer (in a busy client process this is mostly event-loop
  queueing, and it counts against the bot's clock too);
* time-bank draws, time losses (timeouts) and forfeits, from every record's ``meta.seats`` and
  ``notes`` (finished matches and those aborted at the stop: the longest matches are the ones
  still running then);
* CreateMatch latency p50/p99 and its errors by status; matches by final status (ListMatches);
* health at the end; the referee's CPU share; anything the referee logged as an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import sys
import tempfile
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from common import free_port, proc_status_kb, write_json
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rich.console import Console
from rich.table import Table
from scout.v1 import arena_pb2, arena_pb2_grpc, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server.hardening import tune_gc
from trivial_bot import EOF, JSON, Recorder, TurnLog, serve_commands, turnarounds_us

from referee import Child, environment, latency_summary, process_cpu_s, spawn

THIS_SCRIPT = Path(__file__).resolve()
PYTHON = sys.executable
ADMIN_TOKEN = "soak-admin"
MAX_CREATING = 32
"""CreateMatch calls the driver keeps in flight at once (``--create-concurrency``)."""
BOTS_PER_PROCESS = 1250
CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),  # a TCP connection per channel, i.e. per bot
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
]
SAMPLE_S = 0.5


def bot_name(index: int) -> str:
    return f"s{index:05d}"


def bot_token(index: int) -> str:
    return f"soak-token-{index:05d}"


def raise_nofile() -> int:
    """Raise this process's open-file limit to the hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ----- /proc ------------------------------------------------------------------------------------


def socket_count(pid: int) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    count += 1
    return count


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares slope and intercept, or None with fewer than 3 distinct xs."""
    if len(set(xs)) < 3:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return slope, my - slope * mx


# ----- the client processes (child mode) ----------------------------------------------------------


class SoakBot:
    """One bot: its own channel (TCP connection) and Play stream; answers at once."""

    def __init__(self, client: SoakClient, index: int) -> None:
        self.client = client
        self.name = bot_name(index)
        self.token = bot_token(index)
        self.seat = -1
        self.pending: dict[int, float] = {}

    async def run(self, address: str, gate: asyncio.Semaphore) -> None:
        client = self.client
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            stub = arena_pb2_grpc.ArenaStub(channel)
            first = True
            while not client.stopping:
                started = time.monotonic()
                try:
                    if first:
                        async with gate:
                            call = await self._open(stub)
                        client.connected(time.monotonic() - started)
                        first = False
                    else:
                        call = await self._open(stub)
                        client.reconnects += 1
                    await self._play(call)
                    code = await call.code()
                except grpc.aio.AioRpcError as exc:
                    code = exc.code()
                except (TimeoutError, ConnectionError) as exc:
                    client.problems[f"connect: {type(exc).__name__}"] += 1
                    code = None
                if client.stopping:
                    return
                client.stream_ends[code.name if code is not None else "none"] += 1
                if first:
                    client.failed += 1
                    client.check_ready()
                    return
                await asyncio.sleep(0.5)

    async def _open(self, stub: arena_pb2_grpc.ArenaAsyncStub) -> Any:
        call = stub.Play(None, metadata=(("authorization", f"Bearer {self.token}"),),
                         wait_for_ready=True)
        await call.write(arena_pb2.BotMessage(hello=arena_pb2.Hello(
            bot_name=self.name, bot_version="bench-soak", protocol_version=1,
            max_concurrent_matches=1, lean=self.client.lean)))
        welcome = await asyncio.wait_for(call.read(), 120)
        if not isinstance(welcome, arena_pb2.RefereeMessage) \
                or welcome.WhichOneof("body") != "welcome":
            raise ConnectionError(f"no Welcome: {welcome!r}")
        return call

    async def _play(self, call: Any) -> None:
        client = self.client
        received = client.received
        monotonic = time.monotonic
        pending = self.pending
        while True:
            message = await call.read()
            if message is EOF:
                return
            kind = message.WhichOneof("body")
            received[kind] += 1
            if kind == "decision_request":
                got = monotonic()
                request = message.decision_request
                if request.legal_shows:
                    action = game_pb2.Action(show=request.legal_shows[0])
                else:
                    action = game_pb2.Action(scout=request.legal_scouts[0])
                answer = arena_pb2.BotMessage(action=arena_pb2.ActionChoice(
                    match_id=request.match_id, request_id=request.request_id, action=action))
                now = monotonic()
                client.own.add(now, now - got)
                if client.lean:
                    client.request_log.add(got, (request.match_id, request.request_id))
                    client.answer_log.add(now, (request.match_id, request.request_id))
                else:
                    pending[request.request_id] = now
                await call.write(answer)
            elif kind == "rotation_request":
                rotation = message.rotation_request
                if client.lean:
                    client.rotations += 1
                else:
                    pending[rotation.request_id] = -1.0
                await call.write(arena_pb2.BotMessage(rotation=arena_pb2.RotationChoice(
                    match_id=rotation.match_id, request_id=rotation.request_id)))
            elif kind == "answer_result":
                result = message.answer_result
                sent = pending.pop(result.request_id, None)
                if result.status != arena_pb2.ANSWER_STATUS_ACCEPTED or sent is None:
                    client.problems[arena_pb2.AnswerStatus.Name(result.status)] += 1
                elif sent >= 0:
                    now = monotonic()
                    client.decisions.add(now, now - sent)
                else:
                    client.rotations += 1
            elif kind == "match_start":
                self.seat = message.match_start.seat
                pending.clear()
            elif kind == "match_ended":
                if self.seat == 0:
                    sys.stdout.write(f"E {message.match_ended.match_id}\n")
                    sys.stdout.flush()
                self.seat = -1
            elif kind == "error":
                client.problems[f"ProtocolError {message.error.code}"] += 1
            elif kind == "goodbye":
                client.problems["goodbye"] += 1


class SoakClient:
    """A client process: ``count`` bots from ``first``. Prints ``R {json}`` once all have
    connected (or failed); answers ``stats T0 T1`` like bench/trivial_bot.py."""

    def __init__(self, first: int, count: int, lean: bool = True) -> None:
        self.lean = lean
        """Lean streams, the SDK's default: no PublicEvents, no AnswerResult when accepted."""
        self.answer_log = TurnLog()
        self.request_log = TurnLog()
        self.bots = [SoakBot(self, i) for i in range(first, first + count)]
        self.decisions = Recorder()
        self.own = Recorder()
        self.rotations = 0
        self.received: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.stream_ends: Counter[str] = Counter()
        self.reconnects = 0
        self.connect_times: list[float] = []
        self.failed = 0
        self.stopping = False
        self.started = time.monotonic()
        self.ready_sent = False

    def connected(self, seconds: float) -> None:
        self.connect_times.append(seconds)
        self.check_ready()

    def check_ready(self) -> None:
        if self.ready_sent or len(self.connect_times) + self.failed < len(self.bots):
            return
        self.ready_sent = True
        # A bot that answers at once cannot stop for seconds to collect garbage: every bot of
        # the process would miss its clock together. The referee's own policy (freeze what is
        # connected, rare full collections) keeps the harness's collections short.
        tune_gc()
        times = sorted(self.connect_times)
        figures = {"connected": len(times), "failed": self.failed,
                   "all_s": time.monotonic() - self.started,
                   "p50_s": times[len(times) // 2] if times else None,
                   "max_s": times[-1] if times else None,
                   "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}
        sys.stdout.write("R " + json.dumps(figures) + "\n")
        sys.stdout.flush()

    def stats(self, t0: float, t1: float) -> JSON:
        count, latencies = self.decisions.window(t0, t1)
        _, own = self.own.window(t0, t1)
        logs: JSON = {}
        if self.lean:
            logs["answers"] = self.answer_log.window(t0, t1)
            logs["requests"] = self.request_log.window(t0, t1 + 30.0)
            count = len(logs["answers"])
        return {"decisions": count, "latencies_us": latencies, "own_us": own, **logs,
                "rotations": self.rotations, "received": dict(self.received),
                "problems": dict(self.problems), "stream_ends": dict(self.stream_ends),
                "reconnects": self.reconnects, "connected": len(self.connect_times),
                "failed": self.failed, "rss_kb": proc_status_kb(os.getpid()).get("VmRSS", 0)}


async def client_main(address: str, first: int, count: int, concurrency: int,
                      lean: bool = True) -> int:
    raise_nofile()
    client = SoakClient(first, count, lean)
    gate = asyncio.Semaphore(concurrency)
    tasks = [asyncio.create_task(bot.run(address, gate)) for bot in client.bots]
    await serve_commands(client.stats)
    client.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0


# ----- the driver -------------------------------------------------------------------------------


class ClientChild(Child):
    """A client process whose ``E <match id>`` lines go to a callback."""

    on_match_end: Any = None

    def _take(self, line: str) -> None:
        if line.startswith("E ") and self.on_match_end is not None:
            self.on_match_end(line[2:])
        else:
            self.lines.put_nowait(line)


async def spawn_client(name: str, argv: Sequence[str], log_dir: Path) -> ClientChild:
    log = (log_dir / f"{name}.log").open("w")
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
        limit=1 << 28)
    log.close()
    child = ClientChild(name, process)
    child.pump = asyncio.get_running_loop().create_task(child._pump())
    return child


@dataclass
class Keeper:
    """Keeps ``target`` matches running out of a pool of idle bots."""

    stub: matches_pb2_grpc.MatchesAsyncStub
    idle: deque[str]
    players: int
    target: int
    time_control: game_pb2.TimeControl
    active: bool = True
    running: dict[str, list[str]] = field(default_factory=dict)
    created: int = 0
    finished: int = 0
    create_latencies_us: list[int] = field(default_factory=list)
    replace_latencies_us: list[int] = field(default_factory=list)  # creates after a match ended
    errors: Counter[str] = field(default_factory=Counter)
    last_errors: dict[str, str] = field(default_factory=dict)
    early_ends: set[str] = field(default_factory=set)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    seed: int = 1
    create_concurrency: int = MAX_CREATING
    create_batch: int = 1
    """Above 1: matches are made by CreateMatches calls of up to this many, not CreateMatch."""
    batch_sizes: list[int] = field(default_factory=list)
    in_flight: asyncio.Semaphore = field(init=False)
    """An organiser's client keeps a bounded number of calls open (and backs off on errors)."""

    def __post_init__(self) -> None:
        self.in_flight = asyncio.Semaphore(self.create_concurrency)

    async def create(self, replacing: bool = False) -> None:
        metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        while self.active:
            if len(self.idle) < self.players:
                self.wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), 1.0)
                continue
            bots = [self.idle.popleft() for _ in range(self.players)]
            request = matches_pb2.CreateMatchRequest(bots=bots, seed=self.seed,
                                                     time_control=self.time_control)
            self.seed += 1
            async with self.in_flight:
                started = time.perf_counter()
                try:
                    info = await self.stub.CreateMatch(request, metadata=metadata, timeout=30)
                except grpc.aio.AioRpcError as exc:
                    code = exc.code().name
                    self.errors[code] += 1
                    self.last_errors[code] = exc.details() or ""
                    self.idle.extend(bots)  # a busy or disconnected bot goes to the back
                    failed = True
                else:
                    failed = False
            if failed:
                await asyncio.sleep(0.5)
                continue
            latency = round((time.perf_counter() - started) * 1e6)
            self.create_latencies_us.append(latency)
            if replacing:
                self.replace_latencies_us.append(latency)
            self.created += 1
            self.running[info.match_id] = bots
            if info.match_id in self.early_ends:
                self.early_ends.discard(info.match_id)
                self.on_end(info.match_id)
            return

    async def create_many(self, count: int, replacing: bool = False) -> int:
        """Up to ``count`` matches (at most ``create_batch``) in one CreateMatches call, from
        the idle bots there are; how many were made."""
        tables = min(count, self.create_batch, len(self.idle) // self.players)
        if tables <= 0:
            return 0
        seated = [[self.idle.popleft() for _ in range(self.players)] for _ in range(tables)]
        requests = []
        for bots in seated:
            requests.append(matches_pb2.CreateMatchRequest(bots=bots, seed=self.seed,
                                                           time_control=self.time_control))
            self.seed += 1
        metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        async with self.in_flight:
            started = time.perf_counter()
            try:
                reply = await self.stub.CreateMatches(
                    matches_pb2.CreateMatchesRequest(matches=requests), metadata=metadata,
                    timeout=30)
            except grpc.aio.AioRpcError as exc:
                code = exc.code().name
                self.errors[code] += len(seated)
                self.last_errors[code] = exc.details() or ""
                for bots in seated:
                    self.idle.extend(bots)
                await asyncio.sleep(0.5)
                return 0
        latency = round((time.perf_counter() - started) * 1e6)
        self.create_latencies_us.append(latency)
        if replacing:
            self.replace_latencies_us.append(latency)
        self.batch_sizes.append(tables)
        made = 0
        for bots, result in zip(seated, reply.results, strict=True):
            if result.WhichOneof("outcome") != "match":
                self.errors[result.error.code] += 1
                self.last_errors[result.error.code] = result.error.message
                self.idle.extend(bots)
                continue
            made += 1
            self.created += 1
            match_id = result.match.match_id
            self.running[match_id] = bots
            if match_id in self.early_ends:
                self.early_ends.discard(match_id)
                self.on_end(match_id)
        return made

    async def fill_in_batches(self) -> None:
        while self.active and len(self.running) < self.target:
            if not await self.create_many(self.target - len(self.running)):
                await asyncio.sleep(0.05)

    async def replenish(self) -> None:
        """Batch mode: tops the running matches up to ``target`` as they end."""
        while self.active:
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), 1.0)
            while self.active and len(self.running) < self.target and \
                    len(self.idle) >= self.players:
                await self.create_many(self.target - len(self.running), replacing=True)

    def spawn_create(self) -> None:
        if self.create_batch > 1:
            return  # `replenish` tops up
        task = asyncio.get_running_loop().create_task(self.create(replacing=True))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def on_end(self, match_id: str) -> None:
        bots = self.running.pop(match_id, None)
        if bots is None:
            self.early_ends.add(match_id)
            return
        self.finished += 1
        self.idle.extend(bots)
        self.wakeup.set()
        if self.active:
            self.spawn_create()


@dataclass
class Sample:
    at: float
    rss_kb: int
    finished: int
    running: int


def running_at_once(samples: list[Sample], t0: float, t1: float, asked: int) -> JSON | None:
    """How many matches really ran at once in the window: matches that end faster than
    CreateMatch replaces them leave fewer running than ``--matches`` asked for."""
    window = [s.running for s in samples if t0 <= s.at <= t1]
    if not window:
        return None
    mean = sum(window) / len(window)
    return {"mean": round(mean, 1), "min": min(window), "max": max(window), "asked": asked,
            "short": mean < 0.9 * asked}


async def sampler(pid: int, keeper: Keeper, samples: list[Sample]) -> None:
    while True:
        status = proc_status_kb(pid)
        if status:
            samples.append(Sample(time.monotonic(), status["VmRSS"], keeper.finished,
                                  len(keeper.running)))
        await asyncio.sleep(SAMPLE_S)


def read_records(folder: Path, bank_ms: int) -> JSON:
    """Time-bank draws, time losses and forfeits over every record: the finished ones and
    those aborted when the referee stopped. Both count: the longest matches are the ones still
    running at the stop, and their seats' clocks were kept as strictly until then."""
    figures: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    drew_by_status: Counter[str] = Counter()
    bank_used: list[int] = []
    for path in folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            figures["unreadable_records"] += 1
            continue
        meta = record.get("meta", {})
        statuses[str(meta.get("status"))] += 1
        if record.get("finished"):
            figures["finished_records"] += 1
        figures["actions"] += sum(len(r.get("actions", [])) for r in record.get("rounds", []))
        for seat in meta.get("seats", []):
            figures["seats"] += 1
            used = bank_ms - int(seat.get("time_bank_ms", bank_ms))
            if used > 0:
                figures["seats_that_drew_on_the_bank"] += 1
                drew_by_status[str(meta.get("status"))] += 1
                bank_used.append(used)
            figures["timeouts"] += int(seat.get("timeouts", 0))
            figures["strikes"] += int(seat.get("strikes", 0))
            figures["illegal_actions"] += int(seat.get("illegal_actions", 0))
            if seat.get("forfeited"):
                figures["forfeited_seats"] += 1
        for note in record.get("notes", []):
            notes[str(note.get("kind"))] += 1
    bank_used.sort()
    return {**figures, "notes_by_kind": dict(notes), "records_by_status": dict(statuses),
            "drew_on_the_bank_by_status": dict(drew_by_status),
            "bank_drawn_ms": {"total": sum(bank_used),
                              "p50": bank_used[len(bank_used) // 2] if bank_used else 0,
                              "max": bank_used[-1] if bank_used else 0}}


def log_problems(path: Path) -> JSON:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "examples": []}
    bad = [line for line in lines if any(w in line for w in
                                         ("Traceback", "ERROR", "crashed", "Exception"))]
    return {"lines": len(bad), "examples": bad[:8]}


def rss_figures(samples: list[Sample], idle_kb: int, hwm_kb: int, window_end: float) -> JSON:
    steady = [s for s in samples if s.finished > 0 and s.at <= window_end]
    fit = linear_fit([s.finished for s in steady], [s.rss_kb for s in steady])
    last = samples[-1] if samples else None
    out: JSON = {
        "idle_mb": idle_kb / 1024,
        "peak_mb_vmhwm": hwm_kb / 1024,
        "peak_mb_sampled": max((s.rss_kb for s in samples), default=0) / 1024,
        "final_mb": last.rss_kb / 1024 if last else None,
        "fit_kb_per_finished_match": fit[0] if fit else None,
        "fit_samples": len(steady),
        "samples": [[round(s.at - samples[0].at, 2), s.rss_kb, s.finished, s.running]
                    for s in samples],
    }
    after_1000 = next((s for s in samples if s.finished >= 1000), None)
    if after_1000 is not None and last is not None and last.finished - after_1000.finished >= 200:
        out["after_first_1000"] = {
            "rss_mb_at_1000": after_1000.rss_kb / 1024, "finished_at_1000": after_1000.finished,
            "rss_mb_last": last.rss_kb / 1024, "finished_last": last.finished,
            "kb_per_match": (last.rss_kb - after_1000.rss_kb)
            / (last.finished - after_1000.finished)}
    return out


def scrape(url: str) -> str:
    """The referee's metrics page (Prometheus text format)."""
    body: bytes = urllib.request.urlopen(url, timeout=10).read()
    return body.decode()


def bucket_bound(line: str) -> float:
    """The upper bound (``le``) of a histogram bucket's line."""
    bound = line.split('le="', 1)[1].split('"', 1)[0]
    return math.inf if bound == "+Inf" else float(bound)


def gc_histograms(text: str) -> dict[str, JSON]:
    """The referee's scout_gc_pause_seconds by generation, from a scraped metrics page:
    cumulative bucket counts by upper bound, count and sum."""
    out: dict[str, JSON] = {}
    for line in text.splitlines():
        if not line.startswith("scout_gc_pause_seconds"):
            continue
        generation = line.split('generation="', 1)[1].split('"', 1)[0]
        value = float(line.rsplit(" ", 1)[1])
        entry = out.setdefault(generation, {"buckets": {}, "count": 0, "sum": 0.0})
        if line.startswith("scout_gc_pause_seconds_bucket"):
            entry["buckets"][bucket_bound(line)] = value
        elif line.startswith("scout_gc_pause_seconds_count"):
            entry["count"] = int(value)
        elif line.startswith("scout_gc_pause_seconds_sum"):
            entry["sum"] = value
    return out


def gc_pauses(after: dict[str, JSON], before: dict[str, JSON] | None = None) -> JSON:
    """Collections by generation between two scrapes (``before`` None: since the referee
    started): how many, their total seconds, and the upper bound of the longest one's bucket."""
    out: dict[str, JSON] = {}
    for generation, now in after.items():
        then = (before or {}).get(generation, {"buckets": {}, "count": 0, "sum": 0.0})
        longest, below = 0.0, 0.0
        by_bucket: dict[str, int] = {}
        for bound in sorted(now["buckets"]):
            within = now["buckets"][bound] - then["buckets"].get(bound, 0.0)
            if within > below:
                longest = bound
                by_bucket[f"{bound * 1000:g}"] = int(within - below)
            below = within
        out[generation] = {"count": now["count"] - then["count"],
                           "total_s": now["sum"] - then["sum"], "max_le_s": longest,
                           "by_bucket_le_ms": by_bucket}
    return out


def gc_line(pauses: JSON | None) -> str:
    if not pauses:
        return "none"
    return " / ".join((f"{pauses['count']}", f"{pauses['total_s']:.2f} s",
                       f"<= {pauses['max_le_s'] * 1000:g} ms"))


def loop_lag_quantiles(text: str) -> JSON:
    """Upper bucket bounds of the p50, p99 and p99.9 of the referee's loop lag (its histogram),
    from a scraped metrics page."""
    buckets: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith("scout_event_loop_lag_seconds_bucket"):
            buckets.append((bucket_bound(line), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return {"samples": 0}

    def quantile(q: float) -> float:
        return next(bound for bound, count in buckets if count >= q * total)

    return {"samples": int(total), "p50_le_ms": quantile(0.5) * 1000,
            "p99_le_ms": quantile(0.99) * 1000, "p999_le_ms": quantile(0.999) * 1000}


async def health(address: str) -> str:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
        except grpc.aio.AioRpcError as exc:
            return f"{exc.code().name}: {exc.details()}"
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


async def list_statuses(stub: matches_pb2_grpc.MatchesAsyncStub) -> dict[str, int]:
    try:
        response = await stub.ListMatches(matches_pb2.ListMatchesRequest(limit=10_000_000),
                                          metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
                                          timeout=60)
    except grpc.aio.AioRpcError as exc:
        return {f"ListMatches failed: {exc.code().name}": 1}
    counts = Counter(matches_pb2.MatchStatus.Name(m.status) for m in response.matches)
    return dict(counts)


async def run_soak(args: argparse.Namespace, console: Console, work: Path) -> JSON:
    started = time.monotonic()
    nofile = raise_nofile()
    procs = args.bot_procs or max(1, min(8, math.ceil(args.bots / BOTS_PER_PROCESS)))
    tokens = {bot_name(i): bot_token(i) for i in range(args.bots)}
    tokens_file = work / "tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    records = work / "records"
    port = free_port()
    address = f"127.0.0.1:{port}"
    referee = await spawn("referee", [
        PYTHON, "-m", "scout_arena.cli", "referee", "serve", "--port", str(port),
        "--records", str(records), "--admin-token", ADMIN_TOKEN, "--tokens", str(tokens_file),
        "--decision-ms", str(args.decision_ms), "--time-bank-ms", str(args.time_bank_ms),
        "--metrics-port", "0"], work)
    clients: list[ClientChild] = []
    result: JSON = {"benchmark": "scout-arena soak", **environment(),
                    "setup": {"bots": args.bots, "matches": args.matches,
                              "seconds": args.seconds, "players": args.players,
                              "decision_ms": args.decision_ms,
                              "time_bank_ms": args.time_bank_ms, "bot_procs": procs,
                              "create_concurrency": args.create_concurrency,
                              "create_batch": args.create_batch,
                              "nofile": nofile}}
    channel = grpc.aio.insecure_channel(address)
    stub = matches_pb2_grpc.MatchesStub(channel)
    samples: list[Sample] = []
    sample_task: asyncio.Task[None] | None = None
    keeper: Keeper | None = None
    try:
        await referee.expect("referee listening on ", timeout=120)
        metrics_url = (await referee.expect("metrics on ", timeout=30)).split("metrics on ")[1]
        metrics_url = metrics_url.strip()
        console.print(f"[dim]referee up ({time.monotonic() - started:.1f} s); connecting "
                      f"{args.bots:,} bots from {procs} processes[/]")
        connect_started = time.monotonic()
        per = [args.bots // procs + (1 if i < args.bots % procs else 0) for i in range(procs)]
        first = 0
        for i, count in enumerate(per):
            clients.append(await spawn_client(f"client-{i}", [
                PYTHON, str(THIS_SCRIPT), "--client", address, "--first", str(first),
                "--count", str(count), "--connect-concurrency",
                str(args.connect_concurrency), *(["--full"] if args.full else [])], work))
            first += count
        ready = [json.loads((await c.expect("R ", timeout=args.connect_timeout))[2:])
                 for c in clients]
        connect_s = time.monotonic() - connect_started
        connected = sum(r["connected"] for r in ready)
        result["connect"] = {"all_s": connect_s, "connected": connected,
                             "failed": sum(r["failed"] for r in ready),
                             "slowest_bot_s": max((r["max_s"] or 0) for r in ready),
                             "per_process": ready}
        console.print(f"[dim]{connected:,} bots connected in {connect_s:.1f} s[/]")
        await asyncio.sleep(2.0)  # let the referee settle before measuring it idle
        idle = proc_status_kb(referee.pid)
        result["connect"]["referee_sockets"] = socket_count(referee.pid)

        idle_bots = deque(bot_name(i) for i in range(args.bots))
        keeper = Keeper(stub, idle_bots, args.players, args.matches, game_pb2.TimeControl(
            decision_ms=args.decision_ms, time_bank_ms=args.time_bank_ms),
            create_concurrency=args.create_concurrency, create_batch=args.create_batch)
        for client in clients:
            client.on_match_end = keeper.on_end
        sample_task = asyncio.create_task(sampler(referee.pid, keeper, samples))
        gc_at_start = gc_histograms(await asyncio.to_thread(scrape, metrics_url))
        cpu0 = process_cpu_s(referee.pid)
        clients_cpu0 = sum(process_cpu_s(c.pid) for c in clients)
        t0 = time.monotonic()
        if args.create_batch > 1:
            await keeper.fill_in_batches()
            replenisher = asyncio.create_task(keeper.replenish())
            keeper.tasks.add(replenisher)
        else:
            fill = [asyncio.create_task(keeper.create()) for _ in range(args.matches)]
            await asyncio.gather(*fill)
        fill_s = time.monotonic() - t0
        console.print(f"[dim]{keeper.created} matches created in {time.monotonic() - t0:.1f} s"
                      f"; running for {args.seconds:g} s[/]")
        await asyncio.sleep(max(0.0, args.seconds - (time.monotonic() - t0)))
        t1 = time.monotonic()
        cpu1 = process_cpu_s(referee.pid)
        clients_cpu1 = sum(process_cpu_s(c.pid) for c in clients)
        gc_at_window_end = gc_histograms(await asyncio.to_thread(scrape, metrics_url))
        finished_in_window = keeper.finished
        keeper.active = False  # in-flight CreateMatch calls complete (and are counted)
        if keeper.tasks:
            await asyncio.wait(list(keeper.tasks), timeout=60)
        drain_deadline = time.monotonic() + args.drain_seconds
        while keeper.running and time.monotonic() < drain_deadline:
            await asyncio.sleep(0.2)
        t2 = time.monotonic()
        sample_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sample_task
        status = proc_status_kb(referee.pid)
        if status:
            samples.append(Sample(time.monotonic(), status["VmRSS"], keeper.finished, 0))
        result["health_at_end"] = await health(address)
        metrics_at_end = await asyncio.to_thread(scrape, metrics_url)
        result["loop_lag"] = loop_lag_quantiles(metrics_at_end)
        result["gc_pauses"] = gc_pauses(gc_histograms(metrics_at_end))
        result["gc_pauses_in_window"] = gc_pauses(gc_at_window_end, gc_at_start)
        # The referee stops (aborting what still runs) before the clients are asked for their
        # figures: serializing those keeps a client process busy for seconds, and the matches
        # still running would charge that to its bots' banks.
        listed = await list_statuses(stub)
        await stop_referee(referee, result)
        per_client = await asyncio.gather(*(c.stats(t0, t1) for c in clients))
        window = t1 - t0
        decisions = sum(s["decisions"] for s in per_client)
        problems: Counter[str] = Counter()
        ends: Counter[str] = Counter()
        for s in per_client:
            problems.update(s["problems"])
            ends.update(s["stream_ends"])
        result["window_s"] = window
        result["drain_s"] = t2 - t1
        result["matches"] = {
            "created": keeper.created, "finished_in_window": finished_in_window,
            "finished_total": keeper.finished, "still_running_after_drain": len(keeper.running),
            "finished_per_s": finished_in_window / window,
            "running_at_once": running_at_once(samples, t0, t1, args.matches),
            "by_status_listmatches": listed}
        result["decisions"] = {"count": decisions, "per_s": decisions / window,
                               "rotations": sum(s["rotations"] for s in per_client)}
        result["latency_answer_round_trip"] = latency_summary(
            [x for s in per_client for x in s["latencies_us"]] or turnarounds_us(per_client))
        result["lean"] = not args.full
        result["latency_bot_own"] = latency_summary([x for s in per_client for x in s["own_us"]])
        result["create_match"] = {"latency": latency_summary(keeper.create_latencies_us),
                                  "initial_fill_s": fill_s,
                                  "latency_replacing": latency_summary(
                                      keeper.replace_latencies_us),
                                  "mean_batch": (sum(keeper.batch_sizes)
                                                 / len(keeper.batch_sizes)
                                                 if keeper.batch_sizes else None),
                                  "errors": dict(keeper.errors),
                                  "last_errors": keeper.last_errors}
        result["bot_problems"] = dict(problems)
        result["stream_ends"] = dict(ends)
        result["reconnects"] = sum(s["reconnects"] for s in per_client)
        result["clients_rss_mb"] = sum(s["rss_kb"] for s in per_client) / 1024
        result["cpu_share"] = {"referee": (cpu1 - cpu0) / window,
                               "clients": (clients_cpu1 - clients_cpu0) / window}
        result["rss"] = rss_figures(samples, idle.get("VmRSS", 0),
                                    (status or idle).get("VmHWM", 0), t1)
    finally:
        if sample_task is not None:
            sample_task.cancel()
        if keeper is not None:
            keeper.active = False
        # The referee stops first, while every bot still answers at once: the matches it
        # aborts then end as they were played. (Bots quitting first would stop answering one
        # process at a time, and the seats still waiting on them would draw on their banks.)
        await stop_referee(referee, result)
        for client in clients:
            await client.stop("quit", timeout=30)
        if referee.pump is not None:
            referee.pump.cancel()
        await channel.close(None)
    result["records"] = read_records(records, args.time_bank_ms)
    result["referee_log_problems"] = log_problems(work / "referee.log")
    result["elapsed_s"] = time.monotonic() - started
    return result


async def stop_referee(referee: Child, result: JSON) -> None:
    """SIGTERM (running matches are aborted, their records written), once."""
    if referee.process.returncode is not None:
        return
    stop_started = time.monotonic()
    referee.process.terminate()
    try:
        await asyncio.wait_for(referee.process.wait(), 60)
    except TimeoutError:
        referee.process.kill()
        await referee.process.wait()
    result["referee_stop_s"] = time.monotonic() - stop_started
    result["referee_exit"] = referee.process.returncode


# ----- report -----------------------------------------------------------------------------------


def _running(at_once: JSON | None) -> str:
    if not at_once:
        return "-"
    text = f"{at_once['mean']:.0f} / {at_once['min']} / {at_once['max']}"
    if at_once["short"]:
        text += f" (asked for {at_once['asked']}: creation could not keep up with matches ending)"
    return text


def _ms(summary: JSON, key: str) -> str:
    value = summary.get(key)
    return "-" if value is None or value != value else f"{value:.2f}"


def report(console: Console, data: JSON) -> None:
    setup = data["setup"]
    table = Table(title=f"Soak: {setup['bots']:,} bots (one TCP connection each, "
                        f"{setup['bot_procs']} client processes), {setup['matches']} concurrent "
                        f"{setup['players']}-player matches, {setup['seconds']:g} s, decision "
                        f"{setup['decision_ms']} ms + bank {setup['time_bank_ms']} ms")
    table.add_column("figure")
    table.add_column("value", justify="right")
    connect, rss, matches = data.get("connect", {}), data.get("rss", {}), data.get("matches", {})
    rows: list[tuple[str, str]] = []
    if connect:
        rows += [("connect time, all bots", f"{connect['all_s']:.1f} s"),
                 ("bots connected / failed", f"{connect['connected']:,} / {connect['failed']}"),
                 ("referee sockets after connecting", f"{connect.get('referee_sockets', 0):,}")]
    if rss:
        fit = rss.get("fit_kb_per_finished_match")
        rows += [("referee RSS idle (connected, no match)", f"{rss['idle_mb']:.0f} MB"),
                 ("referee RSS peak (VmHWM / sampled)",
                  f"{rss['peak_mb_vmhwm']:.0f} / {rss['peak_mb_sampled']:.0f} MB"),
                 ("RSS growth per finished match (fit)",
                  "-" if fit is None else f"{fit:.1f} kB ({rss['fit_samples']} samples)")]
        late = rss.get("after_first_1000")
        if late:
            rows.append(("RSS after 1,000 -> after last finished",
                         f"{late['rss_mb_at_1000']:.0f} -> {late['rss_mb_last']:.0f} MB "
                         f"({late['kb_per_match']:.1f} kB/match over "
                         f"{late['finished_last'] - late['finished_at_1000']:,})"))
    if matches:
        decisions = data["decisions"]
        lat, own = data["latency_answer_round_trip"], data["latency_bot_own"]
        create = data["create_match"]
        batch = data["setup"].get("create_batch", 1)
        call = "CreateMatches" if batch > 1 else "CreateMatch"
        rows += [("matches created / finished in window / total",
                  f"{matches['created']:,} / {matches['finished_in_window']:,} / "
                  f"{matches['finished_total']:,}"),
                 ("matches finished per second", f"{matches['finished_per_s']:.1f}"),
                 ("matches running at once in the window: mean / min / max (sampled)",
                  _running(matches.get("running_at_once"))),
                 ("decisions/s (accepted turn answers)", f"{decisions['per_s']:,.0f}"),
                 ("answer -> next request p50 / p99 (lean)" if data.get("lean") else
                  "answer round trip p50 / p99 (write -> AnswerResult)",
                  f"{_ms(lat, 'p50_ms')} / {_ms(lat, 'p99_ms')} ms"),
                 ("bot's own time p50 / p99 (request read -> answer written)",
                  f"{_ms(own, 'p50_ms')} / {_ms(own, 'p99_ms')} ms"),
                 (f"{call} p50 / p99, all",
                  f"{_ms(create['latency'], 'p50_ms')} / {_ms(create['latency'], 'p99_ms')} ms"),
                 (f"{call} p50 / p99, replacing ended matches",
                  f"{_ms(create['latency_replacing'], 'p50_ms')} / "
                  f"{_ms(create['latency_replacing'], 'p99_ms')} ms"),
                 ("initial fill (all matches created at once)",
                  f"{create['initial_fill_s']:.1f} s"),
                 ("CreateMatch errors", json.dumps(create["errors"]) or "{}"),
                 (f"{call} calls in flight at most", str(data["setup"].get(
                     "create_concurrency", MAX_CREATING))),
                 ("matches per call: asked at most / mean",
                  f"{batch} / {create.get('mean_batch') or 1:.1f}"),
                 ("referee loop lag p50 / p99 / p99.9 (histogram bound)",
                  " / ".join(f"<= {data.get('loop_lag', {}).get(k, 0):g} ms"
                             for k in ("p50_le_ms", "p99_le_ms", "p999_le_ms"))),
                 *((f"referee collections of generation {gen} in window: count / total / "
                    "longest (bucket)", gc_line(data.get("gc_pauses_in_window", {}).get(gen)))
                   for gen in ("0", "1", "2")),
                 ("referee full garbage collections, whole run: count / total / longest",
                  gc_line(data.get("gc_pauses", {}).get("2"))),
                 ("referee CPU share in window", f"{data['cpu_share']['referee']:.0%}"),
                 ("client processes CPU share", f"{data['cpu_share']['clients']:.0%}")]
    records = data.get("records", {})
    if records:
        rows += [("records read: finished / all",
                  f"{records.get('finished_records', 0):,} / "
                  f"{sum(records.get('records_by_status', {}).values()):,}"),
                 ("seats that drew on the time bank (all records)",
                  f"{records.get('seats_that_drew_on_the_bank', 0):,} of "
                  f"{records.get('seats', 0):,} (total "
                  f"{records['bank_drawn_ms']['total'] / 1000:.1f} s, max "
                  f"{records['bank_drawn_ms']['max']} ms; by record status "
                  f"{json.dumps(records.get('drew_on_the_bank_by_status', {}))})"),
                 ("time losses (timeouts) / forfeited seats",
                  f"{records.get('timeouts', 0):,} / {records.get('forfeited_seats', 0):,}"),
                 ("record notes by kind", json.dumps(records.get("notes_by_kind", {})))]
    rows += [("bot-side problems", json.dumps(data.get("bot_problems", {}))),
             ("streams ended / reconnects",
              f"{json.dumps(data.get('stream_ends', {}))} / {data.get('reconnects', 0)}"),
             ("matches by status (ListMatches)",
              json.dumps(matches.get("by_status_listmatches", {}))),
             ("health at the end", str(data.get("health_at_end"))),
             ("referee log: error lines", str(data["referee_log_problems"]["lines"])),
             ("referee stop (SIGTERM) / exit code",
              f"{data.get('referee_stop_s', 0):.1f} s / {data.get('referee_exit')}")]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in data["referee_log_problems"]["examples"]:
        console.print(f"[yellow]referee log: {line[:200]}[/]")
    console.print(f"[dim]total time {data['elapsed_s']:.1f} s[/]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=2000, help="bots, one connection each")
    parser.add_argument("--matches", type=int, default=200, help="concurrent matches")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to keep them up")
    parser.add_argument("--players", type=int, default=4, choices=(2, 3, 4, 5))
    parser.add_argument("--decision-ms", type=int, default=1000)
    parser.add_argument("--time-bank-ms", type=int, default=10_000)
    parser.add_argument("--bot-procs", type=int, default=0,
                        help=f"client processes (0: one per {BOTS_PER_PROCESS} bots, at most 8)")
    parser.add_argument("--drain-seconds", type=float, default=30.0,
                        help="after the run, let running matches finish this long at most")
    parser.add_argument("--connect-concurrency", type=int, default=64,
                        help="connections each client process opens at once")
    parser.add_argument("--connect-timeout", type=float, default=600.0)
    parser.add_argument("--create-concurrency", type=int, default=MAX_CREATING, metavar="N",
                        help=f"CreateMatch calls kept in flight (default {MAX_CREATING})")
    parser.add_argument("--create-batch", type=int, default=1, metavar="B",
                        help="make matches with CreateMatches calls of up to B matches "
                             "(default 1: one CreateMatch call each)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    parser.add_argument("--keep", metavar="DIR", help="keep logs and records in DIR")
    parser.add_argument("--full", action="store_true",
                        help="bots ask for PublicEvents and every AnswerResult (not lean, "
                             "which the SDK and every kit are by default); the latency is "
                             "then each answer's round trip to its AnswerResult")
    # Child-process mode.
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        return asyncio.run(client_main(args.client, args.first, args.count,
                                       args.connect_concurrency, lean=not args.full))
    if args.bots < args.players * args.matches:
        parser.error(f"--bots must be at least --players x --matches "
                     f"({args.players * args.matches})")
    console = Console() if sys.stdout.isatty() else Console(width=130)
    with contextlib.ExitStack() as stack:
        if args.keep:
            work = Path(args.keep)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-soak-")))
        data = asyncio.run(run_soak(args, console, work))
    report(console, data)
    if args.json:
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
