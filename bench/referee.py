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
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from common import free_port, write_json
from procs import (
    Child,
    CpuSnapshot,
    cpu_shares,
    environment,
    latency_summary,
    other_load_cores,
    spawn,
)
from referee_profile import profiled_referee_main, read_profile
from referee_raw import (
    raw_client_main,
    raw_phase,
    raw_reply,
    raw_server_main,
    typical_decision_request,
)
from referee_report import report, report_profile
from referee_setup import (
    ADMIN_TOKEN,
    BOT_NAMES,
    CONCURRENCY,
    DECISION_MS,
    FULL,
    HEADLINE_CONCURRENCY,
    MAX_CLIENT_PROCESSES,
    NUM_BOTS,
    PROFILE_FULL,
    PROFILE_QUICK,
    QUICK,
    RATIO_GOAL,
    TIME_BANK_MS,
    Timing,
)
from rich.console import Console
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc
from scout_arena.server.eventloop import loop_factory
from trivial_bot import (
    BUNDLED,
    JSON,
    turnarounds_us,
)

BENCH_DIR = Path(__file__).resolve().parent
BOT_SCRIPT = BENCH_DIR / "trivial_bot.py"
THIS_SCRIPT = Path(__file__).resolve()
PYTHON = sys.executable

def default_loops() -> str:
    return "uvloop,asyncio" if loop_factory("auto")[1] == "uvloop" else "asyncio"


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


# ----- main -------------------------------------------------------------------------------


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
