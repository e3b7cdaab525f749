"""Hosted bots benchmark: what the sandbox costs, and how many hosted bots one node keeps
playing at once.

Run as ``.venv/bin/python bench/hosted.py --json bench/results/hosted.json`` (tiny:
``--matches 3 --levels 1,2``).

A. **Start to connected**: a real referee with a `scout_arena.hosting.Host` holds a match of
   1 hosted greedy bot and a remote one, then of ``--seats`` hosted greedy bots (each in its
   own bubblewrap sandbox with its own Unix socket); timed from the call that starts their
   processes to the last of them connected (the match starts then), over ``--matches``
   matches: median and worst.
B. **CPU per decision**: the same greedy bot program, in the sandbox and as a plain process on
   the referee's TCP port (the same per-match life: started for the match, stopped after it),
   against a remote greedy bot, ``--matches`` matches each side, run alternately. The bot reads
   its own CPU clock (user + system, ``time.process_time``) at its first request and as it
   stops, and counts its decisions: CPU per decision excludes the start, which is reported
   apart (the interpreter and the SDK's imports).
C. **Hosted bots at once**: rounds of K simultaneous matches of ``--table`` hosted greedy bots
   each (K x table bots, K in ``--levels``), each round until its matches end: timeouts,
   forfeits, decisions/s, the hosted processes' memory (RSS summed over the bots' process trees
   at the round's peak) and the machine's CPU use. The figure reported is the most bots whose
   round had no timeout and no forfeit; the table shows what grew first as K rose.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import JSON, write_json
from rich.console import Console
from rich.table import Table
from scout_arena.hosting import CodeCache, Host, HostedBot, RunReport, sha256_hex
from scout_arena.sandbox import Sandbox, pack_folder, probe
from scout_arena.server import Referee, RefereeServer
from scout_arena.server.connections import BotEntry
from scout_arena.server.convert import ProtobufWire
from scout_arena.server.match import MatchRunner
from scout_rules.protocol import TimeControl

CPU_BOT = '''
import os, sys, time
from scout_client.bots import GreedyBot
from scout_client.cli import main
import scout_client.cli as cli

first = None
decisions = 0

class Counting(GreedyBot):
    def act(self, observation):
        global first, decisions
        if first is None:
            first = time.process_time()
        decisions += 1
        return super().act(observation)

cli.load_bot = lambda spec, seed=None: Counting()
code = main(["run", "counting"])
end = time.process_time()
print(f"CPU start={first or end:.6f} end={end:.6f} decisions={decisions}", file=sys.stderr,
      flush=True)
sys.exit(code)
'''
TC = TimeControl(decision_ms=1000, time_bank_ms=10_000)


def _bot_folders(root: Path) -> dict[str, Path]:
    greedy = root / "greedy"
    greedy.mkdir(parents=True)
    (greedy / "scout-bot.toml").write_text(
        'runtime = "python"\ncommand = ["python", "-m", "scout_client", "run", "greedy"]\n')
    counting = root / "counting"
    counting.mkdir()
    (counting / "scout-bot.toml").write_text('runtime = "python"\ncommand = ["python", "bot.py"]\n')
    (counting / "bot.py").write_text(CPU_BOT)
    return {"greedy": greedy, "counting": counting}


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.folders = _bot_folders(root / "src")
        cache = CodeCache(root / "cache")
        self.bots: dict[str, tuple[Path, Any]] = {}
        for kind, folder in self.folders.items():
            archive = pack_folder(folder)
            self.bots[kind] = cache.put(sha256_hex(archive), archive)
        self.referee = Referee({"remote": "remote-token"}, wire=ProtobufWire(),
                               default_time_control=TC)
        self.server = RefereeServer(self.referee)
        self.reports: dict[tuple[str, str], asyncio.Future[RunReport]] = {}
        self.ended: dict[str, asyncio.Future[MatchRunner]] = {}
        self.connected_at: dict[str, float] = {}
        self.host = Host(self.referee, Sandbox(), root / "host", on_report=self._report)
        self.referee.on_match_finished.append(self._finished)
        self.referee.streams.on_connect.append(self._connected)

    async def _report(self, report: RunReport) -> None:
        future = self.reports.get((report.match_id, report.bot_name))
        if future is not None and not future.done():
            future.set_result(report)

    def _finished(self, match: MatchRunner) -> None:
        future = self.ended.get(match.match_id)
        if future is not None and not future.done():
            future.set_result(match)

    def _connected(self, bot: BotEntry) -> None:
        self.connected_at[bot.name] = time.perf_counter()

    def hosted(self, name: str, kind: str) -> HostedBot:
        code_dir, manifest = self.bots[kind]
        return HostedBot(name, code_dir, manifest)

    def expect(self, match_id: str, names: Sequence[str]) -> None:
        loop = asyncio.get_running_loop()
        self.ended[match_id] = loop.create_future()
        for name in names:
            self.reports[(match_id, name)] = loop.create_future()


async def start_to_connected(bench: Bench, matches: int, seats: int) -> list[float]:
    times = []
    for index in range(matches):
        match_id = f"conn-{seats}-{index}"
        names = [f"h{seats}-{index}-{s}" for s in range(seats)]
        bench.expect(match_id, names)
        table = names if seats > 1 else [*names, "remote"]
        bench.referee.host_match(match_id, [(n, secrets.token_urlsafe(12)) for n in table],
                                 index, TC, 60)
        started = time.perf_counter()
        await bench.host.start(match_id, [bench.hosted(n, "greedy") for n in names])
        await asyncio.wait_for(bench.ended[match_id], 300)
        times.append(max(bench.connected_at[n] for n in names) - started)
        await asyncio.gather(*(bench.reports[(match_id, n)] for n in names))
    return times


def _cpu_line(text: str) -> tuple[float, float, int] | None:
    for line in reversed(text.splitlines()):
        if line.startswith("CPU "):
            fields = dict(part.split("=") for part in line[4:].split())
            return float(fields["start"]), float(fields["end"]), int(fields["decisions"])
    return None


async def _remote(address: str, token: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
           "SCOUT_CONCURRENCY": "16"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scout_client", "run", "greedy", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)


async def cpu_per_decision(bench: Bench, matches: int) -> dict[str, JSON]:
    sides: dict[str, list[tuple[float, float, int]]] = {"sandbox": [], "plain": []}
    code_dir, _ = bench.bots["counting"]
    for index in range(matches):
        for side in ("sandbox", "plain"):
            match_id = f"cpu-{side}-{index}"
            name = f"cpu-{side}-{index}"
            ticket = secrets.token_urlsafe(12)
            bench.expect(match_id, [name] if side == "sandbox" else [])
            bench.referee.host_match(match_id, [(name, ticket), ("remote",
                                                                  secrets.token_urlsafe(12))],
                                     1000 + index, TC, 60)
            if side == "sandbox":
                await bench.host.start(match_id, [bench.hosted(name, "counting")])
                await asyncio.wait_for(bench.ended[match_id], 300)
                tail = (await bench.reports[(match_id, name)]).outcome.output_tail
            else:
                env = {**os.environ, "SCOUT_ADDRESS": bench.server.address,
                       "SCOUT_TOKEN": ticket, "SCOUT_CONCURRENCY": "1"}
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "bot.py", cwd=code_dir, env=env,
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
                await asyncio.wait_for(bench.ended[match_id], 300)
                process.terminate()
                _, err = await process.communicate()
                tail = err.decode(errors="replace")
            figures = _cpu_line(tail)
            if figures is not None:
                sides[side].append(figures)
    result: dict[str, JSON] = {}
    for side, runs in sides.items():
        decisions = sum(r[2] for r in runs)
        result[side] = {
            "runs": len(runs), "decisions": decisions,
            "start_cpu_s": statistics.median(r[0] for r in runs) if runs else None,
            "cpu_per_decision_us": (sum(r[1] - r[0] for r in runs) / decisions * 1e6)
            if decisions else None}
    return result


def _tree_rss(root_pid: int) -> int:
    """Resident memory of every process below ``root_pid`` (this process's bots)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            rss[int(entry.name)] = int(Path(entry.path, "statm").read_text().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    total = 0
    stack = list(children.get(root_pid, ()))
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total


def _cpu_times() -> tuple[float, float]:
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


async def at_once(bench: Bench, levels: Sequence[int], table: int) -> list[JSON]:
    rows = []
    for k in levels:
        started = time.perf_counter()
        total0, idle0 = _cpu_times()
        match_ids = []
        all_names = []
        for index in range(k):
            match_id = f"load-{k}-{index}"
            names = [f"l{k}-{index}-{s}" for s in range(table)]
            bench.expect(match_id, names)
            bench.referee.host_match(match_id, [(n, secrets.token_urlsafe(12)) for n in names],
                                     5000 + index, TC, 60)
            match_ids.append(match_id)
            all_names += [(match_id, n) for n in names]
        await asyncio.gather(*(bench.host.start(m, [
            bench.hosted(f"l{k}-{i}-{s}", "greedy") for s in range(table)])
            for i, m in enumerate(match_ids)))
        peak = 0
        waiting = asyncio.gather(*(bench.ended[m] for m in match_ids))
        while not waiting.done():
            peak = max(peak, _tree_rss(os.getpid()))
            await asyncio.wait([waiting], timeout=0.5)
        finished = waiting.result()
        elapsed = time.perf_counter() - started
        total1, idle1 = _cpu_times()
        await asyncio.gather(*(bench.reports[key] for key in all_names))
        timeouts = forfeits = decisions = 0
        for match in finished:
            record = match.record
            if record is None or record.outcome is None:
                forfeits += table
                continue
            timeouts += sum(s.timeouts for s in record.outcome.seats)
            forfeits += len(record.outcome.forfeits)
            decisions += sum(len(r.actions) for r in record.rounds)
        rows.append({"hosted_bots": table * k, "matches": k, "seconds": round(elapsed, 2),
                     "decisions_per_s": round(decisions / elapsed, 1), "timeouts": timeouts,
                     "forfeits": forfeits, "peak_rss_mb": round(peak / 2**20, 1),
                     "rss_per_bot_mb": round(peak / 2**20 / (table * k), 1),
                     "cpu_busy": round(1 - (idle1 - idle0) / max(1e-9, total1 - total0), 2)})
    return rows


async def run(args: argparse.Namespace, console: Console) -> JSON:
    root = Path(tempfile.mkdtemp(prefix="bench-hosted-"))
    try:
        bench = Bench(root)
        await bench.server.start()
        remote = await _remote(bench.server.address, "remote-token")
        try:
            while bench.referee.bots.entry("remote").connection is None:
                await asyncio.sleep(0.05)
            console.print("A. start to connected ...")
            one = await start_to_connected(bench, args.matches, 1)
            many = await start_to_connected(bench, args.matches, args.seats)
            console.print("B. CPU per decision ...")
            cpu = await cpu_per_decision(bench, args.matches)
            console.print("C. hosted bots at once ...")
            load = await at_once(bench, args.levels, args.table)
        finally:
            remote.terminate()
            await remote.wait()
            await bench.host.close()
            await bench.server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    clean = [row for row in load if not row["timeouts"] and not row["forfeits"]]
    return {
        "sandbox": probe().reason, "cores": os.cpu_count(),
        "start_to_connected_s": {
            "1_seat": {"median": statistics.median(one), "max": max(one)},
            f"{args.seats}_seats": {"median": statistics.median(many), "max": max(many)}},
        "cpu": cpu, "at_once": load,
        "most_hosted_bots_clean": max((row["hosted_bots"] for row in clean), default=0)}


def report(data: JSON, console: Console, seats: int) -> None:
    table = Table(title="A. start match -> every hosted bot connected (s)")
    for column in ("hosted seats", "median", "max"):
        table.add_column(column)
    for key, value in data["start_to_connected_s"].items():
        table.add_row(key.split("_")[0], f"{value['median']:.3f}", f"{value['max']:.3f}")
    console.print(table)
    table = Table(title="B. greedy bot CPU, in the sandbox and as a plain process")
    for column in ("side", "runs", "decisions", "CPU to start (s)", "CPU per decision (us)"):
        table.add_column(column)
    for side, row in data["cpu"].items():
        per = row["cpu_per_decision_us"]
        table.add_row(side, str(row["runs"]), str(row["decisions"]),
                      f"{row['start_cpu_s']:.3f}" if row["start_cpu_s"] is not None else "-",
                      f"{per:.0f}" if per is not None else "-")
    console.print(table)
    table = Table(title="C. hosted bots playing at once (every seat hosted)")
    columns = ("hosted_bots", "seconds", "decisions_per_s", "timeouts", "forfeits",
               "peak_rss_mb", "rss_per_bot_mb", "cpu_busy")
    for column in columns:
        table.add_column(column)
    for row in data["at_once"]:
        table.add_row(*(str(row[c]) for c in columns))
    console.print(table)
    console.print(f"most hosted bots at once with no timeout or forfeit: "
                  f"{data['most_hosted_bots_clean']} ({data['cores']} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=10)
    parser.add_argument("--seats", type=int, default=4)
    parser.add_argument("--table", type=int, default=4,
                        help="seats of part C's matches, every one hosted (default 4)")
    parser.add_argument("--levels", default="1,2,4,6,8,12",
                        type=lambda text: [int(x) for x in text.split(",")])
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    console = Console()
    data = asyncio.run(run(args, console))
    report(data, console, args.seats)
    if args.json:
        write_json(args.json, data, console)


if __name__ == "__main__":
    main()
