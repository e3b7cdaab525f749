"""What the sandbox costs a hosted bot: start-to-connected latency inside and outside bubblewrap.

Run as ``.venv/bin/python bench/sandbox.py [--runs N] [--json PATH]``.

Design. The same Python bot (it imports the SDK and grpcio, as every hosted Python bot does,
then connects to its address, a Unix socket, and says hello) is started ``--runs`` times each
way, the two ways alternating so that the machine's load falls on both alike:

* inside: ``Sandbox.start`` with the default limits (prlimit, bwrap, setpriv to a leased uid as
  root, the read-only view, the watchdog);
* outside: the same interpreter started directly with the same environment.

Two bots: one importing the SDK and grpcio, and a bare interpreter (``python -S``, no site):
with the import cost gone, what remains of the difference is the sandbox's own cost (prlimit,
bwrap, setpriv, the watchdog's start). Latency is from just before the start call to the moment
the host's socket server reads the bot's hello. The figures are medians (and the 90th
percentile) over the runs; the overhead is the difference of the medians. The hosting helper
adds the per-decision CPU and the bots-per-node figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import warn_busy_machine, write_json
from rich.console import Console
from rich.table import Table
from scout_arena.sandbox import Sandbox, SandboxLimits, parse_manifest, probe

JSON = dict[str, Any]
#: The bots measured: one importing the SDK and grpcio (what hosted Python bots do), and a bare
#: interpreter without site (what is left is the sandbox's own cost and the interpreter's).
BOTS = {
    "sdk": ('runtime = "python"\ncommand = ["python", "bot.py", "sdk"]\n', "SDK bot"),
    "bare": ('runtime = "python"\ncommand = ["python", "-S", "bot.py", "bare"]\n',
             "bare Python (-S)"),
}
BOT = """\
import os, socket, sys
if sys.argv[1] == "sdk":
    import grpc, scout_client
path = os.environ["SCOUT_ADDRESS"].removeprefix("unix:")
with socket.socket(socket.AF_UNIX) as connection:
    connection.connect(path)
    connection.sendall(b"hello\\n")
    connection.recv(16)
"""


class Bench:
    """One socket server and one bot folder, started inside or outside the sandbox."""

    def __init__(self, root: Path, manifest: str) -> None:
        self.root = root
        self.code = root / "code"
        self.code.mkdir()
        (self.code / "bot.py").write_text(BOT)
        (self.code / "scout-bot.toml").write_text(manifest)
        self.socket = root / "referee.sock"
        self.sandbox = Sandbox(SandboxLimits())
        self.manifest = parse_manifest(manifest)
        self._hello: asyncio.Future[float] | None = None

    async def serve(self) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readline()
            if self._hello is not None and not self._hello.done():
                self._hello.set_result(time.perf_counter())
            writer.write(b"ok\n")
            await writer.drain()
            writer.close()

        return await asyncio.start_unix_server(handle, str(self.socket))

    async def inside(self) -> float:
        self._hello = asyncio.get_running_loop().create_future()
        began = time.perf_counter()
        process = await self.sandbox.start(name="bench", code_dir=self.code,
                                           data_dir=self.root / "data", socket_path=self.socket,
                                           manifest=self.manifest)
        connected = await asyncio.wait_for(self._hello, 60)
        outcome = await process.wait()
        if outcome.exit_code != 0:
            raise RuntimeError(f"the sandboxed bot failed: {outcome.reason}\n"
                               f"{outcome.output_tail}")
        return connected - began

    async def outside(self) -> float:
        self._hello = asyncio.get_running_loop().create_future()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root),
               "SCOUT_ADDRESS": f"unix:{self.socket}", "SCOUT_TOKEN": "hosted",
               "SCOUT_BOT_NAME": "bench", "SCOUT_CONCURRENCY": "1",
               "SCOUT_DATA_DIR": str(self.root / "data"), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONUNBUFFERED": "1"}
        began = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            sys.executable, *self.manifest.command[1:], cwd=self.code, env=env,
            stdin=asyncio.subprocess.DEVNULL)
        connected = await asyncio.wait_for(self._hello, 60)
        if await process.wait() != 0:
            raise RuntimeError("the bot outside the sandbox failed")
        return connected - began


def summary(samples: list[float]) -> JSON:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered) * 1000,
            "p90_ms": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1000,
            "min_ms": ordered[0] * 1000, "samples_ms": [value * 1000 for value in samples]}


async def measure_bot(manifest: str, runs: int) -> JSON:
    with tempfile.TemporaryDirectory(prefix="scout-bench-sbx-", dir="/tmp") as folder:
        bench = Bench(Path(folder), manifest)
        server = await bench.serve()
        try:
            await bench.inside()  # warm the page cache for both ways
            await bench.outside()
            inside: list[float] = []
            outside: list[float] = []
            for _ in range(runs):
                inside.append(await bench.inside())
                outside.append(await bench.outside())
        finally:
            server.close()
    inside_summary, outside_summary = summary(inside), summary(outside)
    return {"inside": inside_summary, "outside": outside_summary,
            "overhead_ms": inside_summary["median_ms"] - outside_summary["median_ms"]}


async def measure(runs: int) -> JSON:
    bots = {name: await measure_bot(manifest, runs) for name, (manifest, _) in BOTS.items()}
    return {"runs": runs, "support": probe().reason, "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(), "bots": bots}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="starts each way (default 20)")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    console = Console()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    support = probe()
    if not support.available:
        console.print(f"[red]no sandbox on this host: {support.reason}[/]")
        return 1
    data = asyncio.run(measure(args.runs))
    table = Table(title=f"Hosted Python bot, start to connected ({args.runs} runs each way)")
    for column in ("bot", "where", "median ms", "p90 ms", "min ms", "overhead ms"):
        table.add_column(column, justify="left" if column in ("bot", "where") else "right")
    for name, (_, label) in BOTS.items():
        figures = data["bots"][name]
        for way in ("inside", "outside"):
            way_figures = figures[way]
            table.add_row(label if way == "inside" else "", f"{way} the sandbox",
                          f"{way_figures['median_ms']:.1f}", f"{way_figures['p90_ms']:.1f}",
                          f"{way_figures['min_ms']:.1f}",
                          f"{figures['overhead_ms']:.1f}" if way == "inside" else "")
    console.print(table)
    console.print(f"overhead: difference of the medians; {support.reason}")
    load = data["load_average"][0]
    if load > (os.cpu_count() or 1):
        warn_busy_machine(console, f"the load average was {load:.1f} on "
                          f"{os.cpu_count()} cores", "the difference of the medians still holds, "
                          "the absolute latencies do not")
    if args.json:
        write_json(args.json, data, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
