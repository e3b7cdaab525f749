"""Referee benchmark: refereed decisions per second over loopback, against raw grpc.aio.

Run as ``.venv/bin/python bench/referee.py --json bench/results/referee.json`` (``--quick`` for
a short run, about 30 s; ``--profile`` to profile the referee process under cProfile instead).

Refereed. A real referee process (``scout-arena referee serve``, records written to a temporary
folder) and four trivial bots (``bench/trivial_bot.py``), each in its own process with one Play
stream, seated together in 4-player matches. The bots answer every request at once (rotation:
no; turn: first legal Show, else first legal Scout). This process creates the matches with
``Matches.CreateMatch`` (admin token, 60 s per decision + 600 s bank, so nothing times out)
and keeps the number of running matches constant: bot 0 reports every MatchEnded on its stdout
and a new match is created at once. The referee and bots live through the whole run; between
the levels (1, 10, 100 running matches) the bots hold their answers back, so the matches stand
still and the idle referee does not disturb the raw measurements. Per level, after a warm-up:

* decisions/s = turn answers accepted in the window (all bots) / window length. Rotation
  answers are not decisions (they are counted apart).
* latency = as seen by a bot, from just before writing an ActionChoice to reading the
  AnswerResult for it (p50, p99 over every decision in the window).

Raw baseline, measured just before each refereed level. A grpc.aio server in its own process
(same server options as the referee, ``context.read()/write()`` handler) answers each message
of a bidirectional stream with a 30-byte reply (a serialized ActionChoice); four client
processes (streams split among them, one channel each) send a typical DecisionRequest (the
serialized RefereeMessage closest to the mean size over a few seeded matches played the
trivial bots' way) and wait for the reply, over 1, 10 and 100 concurrent streams. round trips/s
and latency (write to reply) as above.

Both sides' load generators (the bots, the raw clients) freeze what they hold once set up
and make no full garbage collections (`trivial_bot.settle_collector`): a full collection in a
bot stopped every match it sat in for 10-36 ms, which the refereed p99 then showed.

ratio = refereed decisions/s / raw round trips/s at the same concurrency; the headline is the
ratio at 100 concurrent matches (goal >= 0.7). CPU shares come from /proc (one core = 1.0; the
referee's figure includes grpc's own threads). Everything shares the machine's cores, so the
rates are bounded by the CPU that all processes of a setup spend per decision (referee + bots)
or per round trip (server + clients); the "CPU ratio" of those two is printed as a cross-check
that is less sensitive to other load on the machine.

``--profile``: the same refereed setup at 100 concurrent matches, with the referee run in a
process of this script under cProfile (switched on for the measuring window only). cProfile's
clock is wall time: on a busy machine, time the referee spends preempted lands in whatever it was
running (mostly in grpc writes, which wake the receiving bot).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import grpc
import scout_arena
from common import free_port, warn_busy_machine, write_json
from google.protobuf import __version__ as protobuf_version
from rich.console import Console
from rich.table import Table
from scout.v1 import arena_pb2, game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server import convert
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.eventloop import ENV_VAR, loop_factory
from scout_rules import Phase, State
from trivial_bot import (
    BUNDLED,
    EOF,
    JSON,
    Recorder,
    serve_commands,
    settle_collector,
    turnarounds_us,
)

BENCH_DIR = Path(__file__).resolve().parent
BOT_SCRIPT = BENCH_DIR / "trivial_bot.py"
THIS_SCRIPT = Path(__file__).resolve()
PYTHON = sys.executable

CONCURRENCY = (1, 10, 100)
HEADLINE_CONCURRENCY = 100
RATIO_GOAL = 0.7
NUM_BOTS = 4
MAX_CLIENT_PROCESSES = 4
ADMIN_TOKEN = "bench-admin"
BOT_NAMES = tuple(f"b{i}" for i in range(NUM_BOTS))
DECISION_MS = 60_000
TIME_BANK_MS = 600_000
RAW_METHOD = "/bench.PingPong/Play"
SAMPLE_MATCH_ID = "m-0123456789ab"


@dataclass(frozen=True)
class Timing:
    raw_warmup: float
    raw_measure: float
    ref_warmup: float
    ref_measure: float


FULL = Timing(raw_warmup=1.5, raw_measure=12.0, ref_warmup=2.0, ref_measure=22.0)
QUICK = Timing(raw_warmup=0.5, raw_measure=2.0, ref_warmup=0.75, ref_measure=3.5)
PROFILE_FULL = Timing(0, 0, ref_warmup=2.0, ref_measure=12.0)
PROFILE_QUICK = Timing(0, 0, ref_warmup=1.0, ref_measure=5.0)


def default_loops() -> str:
    return "uvloop,asyncio" if loop_factory("auto")[1] == "uvloop" else "asyncio"


# ----- CPU accounting from /proc ------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (0 if it is gone)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = data[data.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(values[:8])
    return (total - values[3] - values[4]) / CLK_TCK, total / CLK_TCK


@dataclass
class CpuSnapshot:
    at: float
    processes: dict[str, float]
    busy: float
    total: float

    @classmethod
    def take(cls, pids: dict[str, int]) -> CpuSnapshot:
        busy, total = machine_busy()
        return cls(time.monotonic(), {k: process_cpu_s(p) for k, p in pids.items()}, busy, total)


def cpu_shares(a: CpuSnapshot, b: CpuSnapshot) -> dict[str, float]:
    """Share of one core per process over [a, b], plus the whole machine's busy cores."""
    wall = b.at - a.at
    out = {k: (b.processes[k] - a.processes[k]) / wall for k in a.processes}
    cores = os.cpu_count() or 1
    out["machine_busy_cores"] = (b.busy - a.busy) / max(1e-9, b.total - a.total) * cores
    return out


def other_load_cores(shares: dict[str, float]) -> float:
    """Cores kept busy by processes outside the measured ones: the machine's busy cores less
    the measured processes' shares (as `cpu_shares` gives them)."""
    return shares["machine_busy_cores"] - sum(
        v for k, v in shares.items() if k != "machine_busy_cores")


# ----- statistics ---------------------------------------------------------------------------


def percentile(ordered: Sequence[int], q: float) -> float:
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return float(ordered[index])


def latency_summary(samples_us: list[int]) -> JSON:
    ordered = sorted(samples_us)
    return {
        "samples": len(ordered),
        "p50_ms": percentile(ordered, 0.50) / 1000,
        "p90_ms": percentile(ordered, 0.90) / 1000,
        "p99_ms": percentile(ordered, 0.99) / 1000,
        "mean_ms": statistics.fmean(ordered) / 1000 if ordered else float("nan"),
        "max_ms": ordered[-1] / 1000 if ordered else float("nan"),
    }


# ----- a typical DecisionRequest --------------------------------------------------------------


def typical_decision_request(matches: int = 6) -> tuple[arena_pb2.RefereeMessage, JSON]:
    """Every DecisionRequest of a few seeded 4-player matches played the trivial bots' way
    (first legal Show, else first legal Scout); returns the one closest to the mean size."""
    samples: list[arena_pb2.RefereeMessage] = []
    for seed in range(1, matches + 1):
        state = State.new(NUM_BOTS, seed)
        request_id = 0
        while not state.is_over:
            if state.phase is Phase.ROTATION:
                for seat in range(NUM_BOTS):
                    state.choose_rotation(seat, False)
                continue
            actor = state.current_seat
            assert actor is not None
            request_id += 1
            samples.append(convert.decision_request(state.observation(actor), SAMPLE_MATCH_ID,
                                                    request_id, DECISION_MS, TIME_BANK_MS))
            shows = state.legal_shows()
            state.apply(shows[0] if shows else state.legal_scouts()[0])
    sizes = [m.ByteSize() for m in samples]
    mean = statistics.fmean(sizes)
    chosen = min(samples, key=lambda m: abs(m.ByteSize() - mean))
    ordered = sorted(sizes)
    info = {"sampled_requests": len(sizes), "sample_matches": matches,
            "decisions_per_match": len(sizes) / matches,
            "mean_bytes": mean, "median_bytes": percentile(ordered, 0.5),
            "p90_bytes": percentile(ordered, 0.9), "max_bytes": ordered[-1],
            "payload_bytes": chosen.ByteSize()}
    return chosen, info


def raw_reply() -> arena_pb2.BotMessage:
    """The raw server's reply: an ActionChoice as the trivial bots send it (~30 bytes)."""
    return arena_pb2.BotMessage(action=arena_pb2.ActionChoice(
        match_id=SAMPLE_MATCH_ID, request_id=123_456,
        action=game_pb2.Action(show=game_pb2.Show(start=3, length=1))))


# ----- child processes --------------------------------------------------------------------


@dataclass
class Child:
    """A child process driven by one-line commands on stdin; replies read from stdout."""

    name: str
    process: asyncio.subprocess.Process
    lines: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    on_end: Callable[[], None] | None = None
    pump: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _pump(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            raw = await stdout.readline()
            if not raw:
                self.lines.put_nowait("")
                return
            self._take(raw.decode().rstrip("\n"))

    def _take(self, line: str) -> None:
        """One stdout line: ``E`` (a match ended) goes to `on_end`, any other to `lines`."""
        if line == "E" and self.on_end is not None:
            self.on_end()
        else:
            self.lines.put_nowait(line)

    async def expect(self, prefix: str, timeout: float = 20.0) -> str:
        """The next stdout line starting with ``prefix`` (other lines are skipped)."""
        async with asyncio.timeout(timeout):
            while True:
                line = await self.lines.get()
                if line.startswith(prefix):
                    return line
                if line == "":
                    await self.process.wait()
                    raise RuntimeError(f"{self.name} exited ({self.process.returncode}) "
                                       f"before printing {prefix!r}")

    async def send(self, command: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(command.encode() + b"\n")
        await stdin.drain()

    async def stats(self, t0: float, t1: float) -> JSON:
        await self.send(f"stats {t0!r} {t1!r}")
        line = await self.expect("S ")
        figures: JSON = json.loads(line[2:])
        return figures

    async def stop(self, command: str | None = "quit", timeout: float = 5.0) -> None:
        """Ask the child to quit with ``command``; with None, kill it at once (SIGKILL).
        Killed anyway if it has not exited within ``timeout``."""
        process = self.process
        if process.returncode is None:
            with contextlib.suppress(OSError, ConnectionError):
                if command is not None:
                    await self.send(command)
                else:
                    process.kill()
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self.pump is not None:
            self.pump.cancel()


async def spawn(name: str, argv: Sequence[str], log_dir: Path,
                on_end: Callable[[], None] | None = None,
                event_loop: str | None = None) -> Child:
    log = (log_dir / f"{name}.log").open("w")
    env = dict(os.environ)
    if event_loop is not None:
        env[ENV_VAR] = event_loop
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
        limit=1 << 26, env=env)
    log.close()
    child = Child(name, process, on_end=on_end)
    child.pump = asyncio.get_running_loop().create_task(child._pump())
    return child


# ----- refereed phase ---------------------------------------------------------------------


class MatchKeeper:
    """Keeps ``target`` matches running: a new one is created whenever one ends."""

    def __init__(self, stub: matches_pb2_grpc.MatchesAsyncStub, target: int) -> None:
        self.stub = stub
        self.target = target
        self.active = True
        self.running = 0
        self.created = 0
        self.ended = 0
        self.failures = 0
        self.last_error = ""
        self._seed = 1
        self._area = 0.0
        self._last = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()

    def _account(self) -> None:
        now = time.monotonic()
        self._area += self.running * (now - self._last)
        self._last = now

    def area(self) -> float:
        """Integral of the number of running matches over time, up to now (match-seconds)."""
        self._account()
        return self._area

    async def create(self) -> None:
        metadata = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        while self.active:
            request = matches_pb2.CreateMatchRequest(
                bots=list(BOT_NAMES), seed=self._seed,
                time_control=game_pb2.TimeControl(decision_ms=DECISION_MS,
                                                  time_bank_ms=TIME_BANK_MS))
            self._seed += 1
            self._account()
            self.running += 1
            try:
                await self.stub.CreateMatch(request, metadata=metadata, timeout=10)
            except grpc.aio.AioRpcError as exc:
                self._account()
                self.running -= 1
                self.failures += 1
                self.last_error = f"{exc.code().name}: {exc.details()}"
                await asyncio.sleep(0.01)
                continue
            self.created += 1
            return

    def on_end(self) -> None:
        self._account()
        self.running -= 1
        self.ended += 1
        if self.active:
            task = asyncio.get_running_loop().create_task(self.create())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)


async def start_referee(log_dir: Path, port: int, profile_out: Path | None,
                        event_loop: str, pass_budget_ms: float | None = None) -> Child:
    records = log_dir / f"records-{event_loop}"
    if profile_out is None:
        argv = [PYTHON, "-m", "scout_arena.cli", "referee", "serve", "--port", str(port),
                "--records", str(records), "--admin-token", ADMIN_TOKEN,
                "--decision-ms", str(DECISION_MS), "--time-bank-ms", str(TIME_BANK_MS)]
        if pass_budget_ms is not None:
            argv += ["--pass-budget-ms", str(pass_budget_ms)]
        for name in BOT_NAMES:
            argv += ["--bot-token", f"{name}=tok-{name}"]
    else:
        argv = [PYTHON, str(THIS_SCRIPT), "--profiled-referee", str(profile_out),
                "--records", str(records), "--port", str(port)]
    return await spawn(f"referee-{event_loop}", argv, log_dir, event_loop=event_loop)


class RefereeSession:
    """One referee process and its four bots, kept for every concurrency level. Between levels
    the bots hold their answers back (``pause``), so the matches stand still and the idle
    referee does not disturb the raw measurements."""

    def __init__(self, work: Path, profile_out: Path | None = None,
                 event_loop: str = "auto", pass_budget_ms: float | None = None) -> None:
        self.work = work
        self.profile_out = profile_out
        self.pass_budget_ms = pass_budget_ms
        """The referee's ``--pass-budget-ms`` (None: its default)."""
        self.event_loop = event_loop
        """The referee's and its bots' event loop (``SCOUT_EVENT_LOOP``)."""
        self.referee: Child | None = None
        self.bots: list[Child] = []
        self.channel: grpc.aio.Channel | None = None
        self.keeper: MatchKeeper | None = None
        self._received: dict[str, int] = {}

    async def start(self) -> None:
        port = free_port()
        address = f"127.0.0.1:{port}"
        self.referee = await start_referee(self.work, port, self.profile_out, self.event_loop,
                                           self.pass_budget_ms)
        self.channel = grpc.aio.insecure_channel(address)
        self.keeper = MatchKeeper(matches_pb2_grpc.MatchesStub(self.channel), 0)
        for i, name in enumerate(BOT_NAMES):  # started with the referee; they wait for it
            argv = [PYTHON, str(BOT_SCRIPT), "--address", address, "--token", f"tok-{name}",
                    "--name", name, "--max-matches", "1000"]
            if i == 0:
                argv.append("--report-ends")
            self.bots.append(await spawn(f"bot-{name}-{self.event_loop}", argv, self.work,
                                         self.keeper.on_end if i == 0 else None,
                                         event_loop=self.event_loop))
        await self.referee.expect("referee listening on ")
        for bot in self.bots:
            await bot.expect("R")

    async def close(self) -> None:
        if self.keeper is not None:
            self.keeper.active = False
        for child in (*self.bots, *([self.referee] if self.referee else [])):
            await child.stop(command=None)  # figures are in; no need for a graceful end
        if self.channel is not None:
            await self.channel.close(None)

    async def tell_bots(self, command: str) -> None:
        for bot in self.bots:
            await bot.send(command)
        for bot in self.bots:
            await bot.expect("P")

    async def level(self, console: Console, concurrency: int, warmup: float,
                    measure: float) -> JSON:
        referee, bots, keeper = self.referee, self.bots, self.keeper
        assert referee is not None and keeper is not None
        phase_start = time.monotonic()
        keeper.active = True
        await asyncio.gather(*(keeper.create() for _ in range(concurrency - keeper.running)))
        await self.tell_bots("resume")
        setup_s = time.monotonic() - phase_start
        await asyncio.sleep(warmup)
        if self.profile_out is not None:
            await referee.send("on")
        pids = {"referee": referee.pid, "driver": os.getpid(),
                **{b.name: b.pid for b in bots}}
        area0, ended0 = keeper.area(), keeper.ended
        before = CpuSnapshot.take(pids)
        await asyncio.sleep(measure)
        after = CpuSnapshot.take(pids)
        area1, ended1 = keeper.area(), keeper.ended
        if self.profile_out is not None:
            await referee.send("off")
            await referee.expect("D", timeout=60)
        per_bot = await asyncio.gather(*(b.stats(before.at, after.at) for b in bots))
        teardown_start = time.monotonic()
        keeper.active = False
        await self.tell_bots("pause")
        teardown_s = time.monotonic() - teardown_start

        wall = after.at - before.at
        decisions = sum(s["decisions"] for s in per_bot)
        rotations = sum(s["rotations"] for s in per_bot)
        latencies = [x for s in per_bot for x in s["latencies_us"]] or turnarounds_us(per_bot)
        received: dict[str, int] = {}
        problems: dict[str, int] = {}
        for s in per_bot:
            for k, v in s["received"].items():
                received[k] = received.get(k, 0) + v
            for k, v in s["problems"].items():
                problems[k] = problems.get(k, 0) + v
        # Messages since the previous level's figures (this level's warm-up and window).
        fresh = {k: v - self._received.get(k, 0) for k, v in received.items()}
        self._received = received
        shares = cpu_shares(before, after)
        bots_share = sum(shares[b.name] for b in bots)
        result: JSON = {
            "concurrency": concurrency,
            "window_s": wall,
            "decisions": decisions,
            "decisions_per_s": decisions / wall,
            "rotations_per_s": rotations / wall,
            "answers_per_s": (decisions + rotations) / wall,
            "latency": latency_summary(latencies),
            "matches_ended_in_window": ended1 - ended0,
            "mean_running_matches": (area1 - area0) / wall,
            "decisions_per_match": decisions / (ended1 - ended0) if ended1 > ended0 else None,
            "messages_to_bots_per_decision": messages_per_request(fresh),
            "bundled_share": bundled_share(fresh),
            "messages_received_by_kind": fresh,
            "problems": problems,
            "create_match_failures": keeper.failures,
            "create_match_last_error": keeper.last_error,
            "cpu_share": {"referee": shares["referee"], "bots": bots_share,
                          "driver": shares["driver"],
                          "machine_busy_cores": shares["machine_busy_cores"]},
            "referee_cpu_us_per_decision": shares["referee"] * wall / max(1, decisions) * 1e6,
            "bots_cpu_us_per_decision": bots_share * wall / max(1, decisions) * 1e6,
            "other_load_cores": other_load_cores(shares),
            "setup_s": setup_s,
            "teardown_s": teardown_s,
        }
        console.print(f"[dim]refereed {concurrency:>3} matches: "
                      f"{result['decisions_per_s']:,.0f} decisions/s (setup {setup_s:.1f} s, "
                      f"pause {teardown_s:.1f} s)[/]")
        return result


def messages_per_request(received: dict[str, int]) -> float:
    """Messages on the wire to the bots (a RefereeBundle is one) per DecisionRequest (alone or
    in a bundle)."""
    wire = sum(v for k, v in received.items() if not k.startswith(BUNDLED))
    requests = received.get("decision_request", 0) + received.get(
        BUNDLED + "decision_request", 0)
    return wire / max(1, requests)


def bundled_share(received: dict[str, int]) -> float:
    """The share of the messages to the bots that came inside a bundle."""
    inner = sum(v for k, v in received.items() if k.startswith(BUNDLED))
    alone = sum(v for k, v in received.items() if not k.startswith(BUNDLED) and k != "bundle")
    return inner / max(1, inner + alone)


# ----- raw ping-pong phase ----------------------------------------------------------------


async def raw_phase(console: Console, concurrency: int, warmup: float, measure: float,
                    server: Child, clients: Sequence[Child]) -> JSON:
    """``concurrency`` ping-pong streams split over the (already running) client processes."""
    phase_start = time.monotonic()
    used = min(concurrency, len(clients))
    split = [concurrency // used + (1 if i < concurrency % used else 0) if i < used else 0
             for i in range(len(clients))]
    for client, streams in zip(clients, split, strict=True):
        await client.send(f"streams {streams}")
    for client in clients:
        await client.expect("R")
    setup_s = time.monotonic() - phase_start
    await asyncio.sleep(warmup)
    pids = {"server": server.pid, "driver": os.getpid(), **{c.name: c.pid for c in clients}}
    before = CpuSnapshot.take(pids)
    await asyncio.sleep(measure)
    after = CpuSnapshot.take(pids)
    per_client = await asyncio.gather(*(c.stats(before.at, after.at) for c in clients))
    teardown_start = time.monotonic()
    for client in clients:
        await client.send("streams 0")
    for client in clients:
        await client.expect("R")
    teardown_s = time.monotonic() - teardown_start
    wall = after.at - before.at
    trips = sum(s["round_trips"] for s in per_client)
    shares = cpu_shares(before, after)
    result: JSON = {
        "concurrency": concurrency,
        "client_processes": used,
        "window_s": wall,
        "round_trips": trips,
        "round_trips_per_s": trips / wall,
        "latency": latency_summary([x for s in per_client for x in s["latencies_us"]]),
        "cpu_share": {"server": shares["server"],
                      "clients": sum(shares[c.name] for c in clients),
                      "driver": shares["driver"],
                      "machine_busy_cores": shares["machine_busy_cores"]},
        "server_cpu_us_per_round_trip": shares["server"] * wall / max(1, trips) * 1e6,
        "clients_cpu_us_per_round_trip": sum(shares[c.name] for c in clients) * wall
        / max(1, trips) * 1e6,
        "other_load_cores": other_load_cores(shares),
        "setup_s": setup_s,
        "teardown_s": teardown_s,
    }
    console.print(f"[dim]raw      {concurrency:>3} streams: "
                  f"{result['round_trips_per_s']:,.0f} round trips/s (setup {setup_s:.1f} s, "
                  f"teardown {teardown_s:.1f} s)[/]")
    return result


# ----- the raw server and client (child process modes) --------------------------------------


async def raw_server_main() -> int:
    from scout_arena.server.listener import SERVER_OPTIONS

    reply = raw_reply()

    async def play(request_iterator: Any, context: Any) -> None:
        while True:
            message = await context.read()
            if message is EOF:
                return
            await context.write(reply)

    handler = grpc.method_handlers_generic_handler("bench.PingPong", {
        "Play": grpc.stream_stream_rpc_method_handler(
            cast(Any, play),
            request_deserializer=arena_pb2.RefereeMessage.FromString,
            response_serializer=arena_pb2.BotMessage.SerializeToString),
    })
    server = grpc.aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"raw server listening on 127.0.0.1:{port}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # until stdin closes
    await server.stop(grace=0.5)
    return 0


async def raw_client_main(address: str, payload_path: Path) -> int:
    """A ping-pong client process: ``streams N`` (re)opens N streams on its one channel, each
    writing the payload and waiting for the reply in a loop; prints ``R`` when they run."""
    request = arena_pb2.RefereeMessage.FromString(payload_path.read_bytes())
    recorder = Recorder()
    tasks: list[asyncio.Task[None]] = []

    async with grpc.aio.insecure_channel(address) as channel:
        method = channel.stream_stream(
            RAW_METHOD, request_serializer=arena_pb2.RefereeMessage.SerializeToString,
            response_deserializer=arena_pb2.BotMessage.FromString)

        async def ping_pong(call: Any, started: asyncio.Event) -> None:
            monotonic = time.monotonic
            add = recorder.add
            await call.write(request)  # one untimed round trip first
            await call.read()
            started.set()
            try:
                while True:
                    t0 = monotonic()
                    await call.write(request)
                    reply = await call.read()
                    if reply is EOF:
                        return
                    now = monotonic()
                    add(now, now - t0)
            finally:
                call.cancel()

        async def streams(words: list[str]) -> None:
            if words[0] != "streams":
                return
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            tasks.clear()
            events = [asyncio.Event() for _ in range(int(words[1]))]
            tasks.extend(asyncio.create_task(ping_pong(method(None), e)) for e in events)
            for event in events:
                await event.wait()
            settle_collector()
            sys.stdout.write("R\n")
            sys.stdout.flush()

        def stats(t0: float, t1: float) -> JSON:
            count, latencies = recorder.window(t0, t1)
            return {"round_trips": count, "latencies_us": latencies}

        await serve_commands(stats, streams)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return 0


# ----- the referee under cProfile (child process mode) ---------------------------------------


def profiled_referee_main(out: Path, records: Path, port: int) -> int:
    """The referee as ``scout-arena referee serve`` runs it, in this process, with cProfile
    switched on and off by ``on``/``off`` lines on stdin (``off`` dumps the stats to ``out``
    and prints ``D``)."""
    import cProfile
    import logging

    from scout_arena.server import Referee, RefereeServer, TimeControl, serve_forever

    logging.basicConfig(level=logging.WARNING)
    records.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()

    async def main() -> None:
        referee = Referee({name: f"tok-{name}" for name in BOT_NAMES}, wire=ProtobufWire(),
                          records_dir=records,
                          default_time_control=TimeControl(DECISION_MS, TIME_BANK_MS))
        server = RefereeServer(referee, host="127.0.0.1", port=port, admin_token=ADMIN_TOKEN)
        ready = asyncio.Event()
        task = asyncio.create_task(serve_forever(server, 0.0, ready))
        await ready.wait()
        print(f"referee listening on {server.address}", flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while not task.done():
            line = (await reader.readline()).decode().strip()
            if line == "on":
                profiler.enable()
            elif line == "off":
                profiler.disable()
                profiler.dump_stats(str(out))
                print("D", flush=True)
            elif not line:
                break
        await task

    asyncio.run(main())
    return 0


def _where(key: tuple[str, int, str]) -> str:
    """``function file.py:line`` (just the function for built-ins)."""
    path, line, func = key
    if path == "~":
        return func
    folder, _, name = path.rpartition("/")
    package = folder.rpartition("/")[2]
    if package in ("server", "scout_rules", "scout_arena", "asyncio", "grpc", "aio"):
        name = f"{package}/{name}"
    return f"{func} {name}:{line}"


def read_profile(path: Path, decisions: int, top: int = 30) -> JSON:
    stats = pstats.Stats(str(path))
    raw = cast(dict[tuple[str, int, str], tuple[int, int, float, float, Any]],
               stats.stats)  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    rows: list[JSON] = [
        {"function": _where(k), "ncalls": v[1], "tottime_s": v[2], "cumtime_s": v[3],
         "tottime_share": v[2] / total if total else 0.0,
         "tottime_us_per_decision": v[2] / max(1, decisions) * 1e6,
         "cumtime_us_per_decision": v[3] / max(1, decisions) * 1e6}
        for k, v in raw.items()]
    by_self = sorted(rows, key=lambda r: -r["tottime_s"])[:top]
    ours = [r for path_row, r in zip(raw, rows, strict=True) if "scout_arena" in path_row[0]]
    by_cum = sorted(ours, key=lambda r: -r["cumtime_s"])[:top]
    return {"total_profiled_s": total, "decisions": decisions, "top_self": by_self,
            "top_cumulative_scout_arena": by_cum}


# ----- report -------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "[bold green]PASS[/]" if ok else "[bold yellow]BELOW[/]"


def report(console: Console, data: JSON) -> None:
    table = Table(title="Refereed 4-player matches vs raw grpc.aio ping-pong, loopback")
    for col in ("conc", "refereed dec/s", "p50 ms", "p99 ms", "raw rt/s", "raw p50",
                "raw p99", "ratio"):
        table.add_column(col, justify="right")
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        table.add_row(
            str(level["concurrency"]),
            f"{ref['decisions_per_s']:,.0f}",
            f"{ref['latency']['p50_ms']:.2f}", f"{ref['latency']['p99_ms']:.2f}",
            f"{raw['round_trips_per_s']:,.0f}",
            f"{raw['latency']['p50_ms']:.2f}", f"{raw['latency']['p99_ms']:.2f}",
            f"{level['ratio']:.2f}",
            style="bold" if level["concurrency"] == HEADLINE_CONCURRENCY else "",
        )
    console.print(table)
    loops = list(data["levels"][0].get("refereed_by_event_loop", {}))
    if len(loops) > 1:
        side = Table(title="The referee and its bots on each event loop, side by side")
        side.add_column("conc", justify="right")
        for loop in loops:
            for col in ("dec/s", "p99 ms", "ratio", "ref µs/dec"):
                side.add_column(f"{loop} {col}", justify="right")
        for level in data["levels"]:
            cells = [str(level["concurrency"])]
            for loop in loops:
                r = level["refereed_by_event_loop"][loop]
                cells += [f"{r['decisions_per_s']:,.0f}", f"{r['latency']['p99_ms']:.2f}",
                          f"{level['ratio_by_event_loop'][loop]:.2f}",
                          f"{r['referee_cpu_us_per_decision']:.0f}"]
            side.add_row(*cells)
        console.print(side)
    payload = data["payload"]
    console.print(
        "[dim]conc: running matches (refereed) = open streams (raw). refereed dec/s: turn "
        "answers accepted per second, all bots (lean streams, the SDK default); p50/p99: from "
        "a seat's ActionChoice written to the match's next request reaching the next seat. "
        f"Refereed columns: the {data['levels'][0].get('event_loop', 'asyncio')} event loop. "
        "raw rt/s, p50/p99: a client writes a "
        f"{payload['payload_bytes']}-byte DecisionRequest (mean of sampled requests "
        f"{payload['mean_bytes']:.0f} B), the server answers {payload['reply_bytes']} B; from "
        "write to reply. ratio = refereed dec/s / raw rt/s.[/]")

    cpu = Table(title="CPU: share of one core, and µs per decision / round trip")
    for col in ("conc", "referee", "µs/dec", "bots", "µs/dec ", "raw server", "µs/rt",
                "clients", "µs/rt "):
        cpu.add_column(col, justify="right")
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        cpu.add_row(
            str(level["concurrency"]),
            f"{ref['cpu_share']['referee']:.0%}", f"{ref['referee_cpu_us_per_decision']:.0f}",
            f"{ref['cpu_share']['bots']:.0%}", f"{ref['bots_cpu_us_per_decision']:.0f}",
            f"{raw['cpu_share']['server']:.0%}", f"{raw['server_cpu_us_per_round_trip']:.0f}",
            f"{raw['cpu_share']['clients']:.0%}", f"{raw['clients_cpu_us_per_round_trip']:.0f}",
        )
    console.print(cpu)
    console.print(
        "[dim]referee (with grpc's threads) and the four bots during the refereed window; raw "
        "server and its client processes during the raw window.[/]")
    for level in data["levels"]:
        ref, raw = level["refereed"], level["raw"]
        console.print(
            f"[dim]  {level['concurrency']:>3} matches: "
            f"{ref['messages_to_bots_per_decision']:.2f} messages to bots per decision "
            f"({100 * ref['bundled_share']:.0f} % of what they carry in bundles), "
            f"{ref['rotations_per_s']:,.0f} rotations/s, {ref['matches_ended_in_window']} "
            f"ended in the window, mean running {ref['mean_running_matches']:.1f}; "
            f"CPU per decision, referee + bots {level['cpu_per_decision_us']:,.0f} µs vs raw "
            f"server + clients {level['cpu_per_round_trip_us']:,.0f} µs per round trip "
            f"(ratio {level['cpu_ratio']:.2f}); other processes busy "
            f"{ref['other_load_cores']:.2f}/{raw['other_load_cores']:.2f} cores "
            "(refereed/raw window)[/]")
        if ref["problems"] or ref["create_match_failures"]:
            console.print(f"[yellow]  {level['concurrency']:>3}: problems {ref['problems']}, "
                          f"CreateMatch failures {ref['create_match_failures']} "
                          f"({ref['create_match_last_error']})[/]")
    busiest = max(max(lv["refereed"]["other_load_cores"], lv["raw"]["other_load_cores"])
                  for lv in data["levels"])
    if busiest > 0.25:
        warn_busy_machine(console, f"processes outside this benchmark kept up to {busiest:.2f} "
                          f"of {data['cpu_count']} cores busy during the measurements",
                          "absolute rates are pessimistic and noisy, the ratios (raw and "
                          "refereed measured back to back) hold better")
    head = data["headline"]
    console.print(f"headline: refereed/raw at {HEADLINE_CONCURRENCY} concurrent matches = "
                  f"{head['ratio']:.2f} (goal >= {RATIO_GOAL}): {verdict(head['pass'])}")
    if not head["pass"]:
        console.print("[dim]run with --profile to see where the referee process spends its "
                      "time[/]")
    console.print(f"[dim]total benchmark time {data['elapsed_s']:.1f} s[/]")


def report_profile(console: Console, data: JSON) -> None:
    prof = data["profile"]
    table = Table(title=f"Referee under cProfile, {HEADLINE_CONCURRENCY} concurrent matches: "
                        "top functions by own time")
    for col, justify in (("function", "left"), ("calls", "right"), ("own s", "right"),
                         ("own %", "right"), ("own µs/dec", "right"), ("cum µs/dec", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in prof["top_self"]:
        table.add_row(row["function"], f"{row['ncalls']:,}", f"{row['tottime_s']:.3f}",
                      f"{row['tottime_share']:.1%}", f"{row['tottime_us_per_decision']:.1f}",
                      f"{row['cumtime_us_per_decision']:.1f}")
    console.print(table)
    cum = Table(title="scout_arena functions by cumulative time")
    for col, justify in (("function", "left"), ("calls", "right"), ("cum µs/dec", "right"),
                         ("own µs/dec", "right")):
        cum.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in prof["top_cumulative_scout_arena"]:
        cum.add_row(row["function"], f"{row['ncalls']:,}",
                    f"{row['cumtime_us_per_decision']:.1f}",
                    f"{row['tottime_us_per_decision']:.1f}")
    console.print(cum)
    ref = data["refereed"]
    console.print(
        f"[dim]profiled window: {ref['decisions']:,} decisions, {ref['decisions_per_s']:,.0f}/s "
        f"under cProfile (slower than unprofiled), {prof['total_profiled_s']:.2f} s of "
        f"profiled main-thread time = {prof['total_profiled_s'] / ref['decisions'] * 1e6:.0f} "
        "µs per decision; grpc's C-core threads are not seen by cProfile[/]")


# ----- main -------------------------------------------------------------------------------


def environment() -> JSON:
    return {
        "scout_arena_version": scout_arena.__version__,
        "python": sys.version.split()[0],
        "grpcio": grpc.__version__,
        "protobuf": protobuf_version,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


async def run_benchmark(console: Console, timing: Timing, quick: bool,
                        event_loops: Sequence[str], pass_budget_ms: float | None = None
                        ) -> JSON:
    """``event_loops``: the referee (and its bots) is measured on each, side by side at every
    level; the last is the headline (what ships by default)."""
    started = time.perf_counter()
    request, payload = typical_decision_request()
    payload["reply_bytes"] = raw_reply().ByteSize()
    levels: list[JSON] = []
    with tempfile.TemporaryDirectory(prefix="bench-referee-") as tmp:
        work = Path(tmp)
        payload_path = work / "decision_request.bin"
        payload_path.write_bytes(request.SerializeToString())
        server = await spawn("raw-server", [PYTHON, str(THIS_SCRIPT), "--raw-server"], work)
        clients: list[Child] = []
        sessions = {loop: RefereeSession(work, event_loop=loop,
                                         pass_budget_ms=pass_budget_ms)
                    for loop in event_loops}
        try:
            line = await server.expect("raw server listening on ")
            address = line.rsplit(" ", 1)[1]
            for i in range(MAX_CLIENT_PROCESSES):
                clients.append(await spawn(f"client-{i}", [
                    PYTHON, str(THIS_SCRIPT), "--raw-client", address,
                    "--payload", str(payload_path)], work))
            for session in sessions.values():
                await session.start()
                await session.tell_bots("pause")
            console.print(f"[dim]processes started in {time.perf_counter() - started:.1f} s[/]")
            for concurrency in CONCURRENCY:
                raw = await raw_phase(console, concurrency, timing.raw_warmup,
                                      timing.raw_measure, server, clients)
                by_loop: dict[str, JSON] = {}
                for loop, session in sessions.items():
                    console.print(f"[dim]  ({loop} event loop)[/]")
                    by_loop[loop] = await session.level(console, concurrency,
                                                        timing.ref_warmup, timing.ref_measure)
                ref = by_loop[event_loops[-1]]
                ref_cpu = ref["referee_cpu_us_per_decision"] + ref["bots_cpu_us_per_decision"]
                raw_cpu = (raw["server_cpu_us_per_round_trip"]
                           + raw["clients_cpu_us_per_round_trip"])
                levels.append({"concurrency": concurrency, "refereed": ref, "raw": raw,
                               "event_loop": event_loops[-1],
                               "refereed_by_event_loop": by_loop,
                               "ratio_by_event_loop": {
                                   loop: r["decisions_per_s"] / raw["round_trips_per_s"]
                                   for loop, r in by_loop.items()},
                               "ratio": ref["decisions_per_s"] / raw["round_trips_per_s"],
                               "cpu_per_decision_us": ref_cpu,
                               "cpu_per_round_trip_us": raw_cpu,
                               "cpu_ratio": raw_cpu / ref_cpu})
        finally:
            for session in sessions.values():
                await session.close()
            for child in (server, *clients):
                await child.stop(command=None)
    head = next(lv for lv in levels if lv["concurrency"] == HEADLINE_CONCURRENCY)
    return {
        "benchmark": "scout-arena referee",
        "mode": "quick" if quick else "full",
        **environment(),
        "timing": timing.__dict__,
        "setup": {"bots": NUM_BOTS, "players_per_match": NUM_BOTS,
                  "decision_ms": DECISION_MS, "time_bank_ms": TIME_BANK_MS,
                  "raw_client_processes_max": MAX_CLIENT_PROCESSES,
                  "pass_budget_ms": pass_budget_ms},
        "payload": payload,
        "levels": levels,
        "headline": {"concurrency": HEADLINE_CONCURRENCY, "ratio": head["ratio"],
                     "goal": RATIO_GOAL, "pass": head["ratio"] >= RATIO_GOAL,
                     "refereed_decisions_per_s": head["refereed"]["decisions_per_s"],
                     "raw_round_trips_per_s": head["raw"]["round_trips_per_s"]},
        "elapsed_s": time.perf_counter() - started,
    }


async def run_profile(console: Console, timing: Timing, quick: bool,
                      keep: Path | None) -> JSON:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-referee-prof-") as tmp:
        work = Path(tmp)
        out = keep or work / "referee.prof"
        session = RefereeSession(work, profile_out=out)
        try:
            await session.start()
            ref = await session.level(console, HEADLINE_CONCURRENCY, timing.ref_warmup,
                                      timing.ref_measure)
        finally:
            await session.close()
        profile = read_profile(out, ref["decisions"])
    return {"benchmark": "scout-arena referee (cProfile)", "mode": "quick" if quick else "full",
            **environment(), "timing": timing.__dict__, "refereed": ref, "profile": profile,
            "elapsed_s": time.perf_counter() - started}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    parser.add_argument("--quick", action="store_true", help="a short run (about 35 s)")
    parser.add_argument("--pass-budget-ms", type=float, metavar="MS",
                        help="the referee's --pass-budget-ms (default: the referee's own; "
                             "1000 turns the budget off, docs/deploy.md#under-load)")
    parser.add_argument("--event-loops", default=default_loops(), metavar="A,B",
                        help="the referee's and its bots' event loops, measured side by side; "
                             "the last is the headline (default: uvloop,asyncio when uvloop is "
                             "installed: stock asyncio ships)")
    parser.add_argument("--profile", action="store_true",
                        help="instead: profile the referee process under cProfile at "
                             f"{HEADLINE_CONCURRENCY} concurrent matches")
    parser.add_argument("--profile-out", metavar="PATH",
                        help="with --profile: keep the pstats file here")
    # Child-process modes, used by the benchmark itself.
    parser.add_argument("--raw-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--raw-client", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--payload", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--profiled-referee", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--records", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.raw_server:
        return asyncio.run(raw_server_main())
    if args.raw_client:
        return asyncio.run(raw_client_main(args.raw_client, Path(args.payload)))
    if args.profiled_referee:
        return profiled_referee_main(Path(args.profiled_referee), Path(args.records),
                                     args.port)

    console = Console()
    if args.profile:
        timing = PROFILE_QUICK if args.quick else PROFILE_FULL
        data = asyncio.run(run_profile(console, timing, args.quick,
                                       Path(args.profile_out) if args.profile_out else None))
        report_profile(console, data)
    else:
        data = asyncio.run(run_benchmark(console, QUICK if args.quick else FULL, args.quick,
                                         args.event_loops.split(","), args.pass_budget_ms))
        report(console, data)
    if args.json:
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
