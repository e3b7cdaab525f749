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
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path

import grpc
from common import free_port, proc_status_kb, write_json
from grpc_health.v1 import health_pb2, health_pb2_grpc
from procs import (
    Child,
    environment,
    latency_summary,
    process_cpu_s,
    raise_nofile,
    socket_count,
    spawn,
)
from rich.console import Console
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc
from soak_bots import bot_name, bot_token, client_main
from soak_keeper import ADMIN_TOKEN, MAX_CREATING, ClientChild, Keeper, spawn_client
from soak_report import (
    Sample,
    gc_histograms,
    gc_pauses,
    log_problems,
    loop_lag_quantiles,
    read_records,
    report,
    rss_figures,
    running_at_once,
    scrape,
)
from trivial_bot import JSON, turnarounds_us

THIS_SCRIPT = Path(__file__).resolve()
PYTHON = sys.executable
BOTS_PER_PROCESS = 1250
SAMPLE_S = 0.5


# ----- the driver -------------------------------------------------------------------------------


async def sampler(pid: int, keeper: Keeper, samples: list[Sample]) -> None:
    while True:
        status = proc_status_kb(pid)
        if status:
            samples.append(Sample(time.monotonic(), status["VmRSS"], keeper.finished,
                                  len(keeper.running)))
        await asyncio.sleep(SAMPLE_S)


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
