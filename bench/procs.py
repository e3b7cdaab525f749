"""Child processes of the benchmarks and the CPU they spend: /proc accounting, latency
summaries, a line-driven child process, and the environment a result was measured in.

Shared by bench/referee.py, bench/soak.py and bench/nodes.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import scout_arena
from google.protobuf import __version__ as protobuf_version
from scout_arena.server.eventloop import ENV_VAR
from trivial_bot import (
    JSON,
)

# ----- CPU accounting from /proc ------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (0 if it is gone)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = data[data.rindex(")") + 2 :].split()
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
        v for k, v in shares.items() if k != "machine_busy_cores"
    )


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
                    raise RuntimeError(
                        f"{self.name} exited ({self.process.returncode}) before printing {prefix!r}"
                    )

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


async def spawn(
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    on_end: Callable[[], None] | None = None,
    event_loop: str | None = None,
) -> Child:
    log = (log_dir / f"{name}.log").open("w")
    env = dict(os.environ)
    if event_loop is not None:
        env[ENV_VAR] = event_loop
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
        limit=1 << 26,
        env=env,
    )
    log.close()
    child = Child(name, process, on_end=on_end)
    child.pump = asyncio.get_running_loop().create_task(child._pump())
    return child


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
