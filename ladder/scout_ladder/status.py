"""What `ladder serve` tells its operator while it runs and when it stops: one status line
every ``--status-every`` seconds (bots connected, matches running and settled, nodes) and a
summary at exit. Quiet by default: a line a minute, and none while nothing changes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from .service import Ladder

DEFAULT_EVERY_S = 60.0
QUIET_REPEAT = 10
SAMPLE_S = 5.0
"""An unchanged status line is printed again only every this many periods."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < 10**6:
        raise argparse.ArgumentTypeError("0 (no status line) or a number of seconds")
    return value


def add_status_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status-every",
        type=_seconds,
        default=DEFAULT_EVERY_S,
        metavar="SECONDS",
        help="print a status line this often (bots connected, matches "
        f"running and finished, nodes); 0: none (default {DEFAULT_EVERY_S:g})",
    )


@dataclass(frozen=True)
class Status:
    """The ladder's state as the status line says it."""

    bots: int
    busy: int
    running: int
    finished: int
    void: int
    nodes: int | None
    used: int = 0
    capacity: int = 0

    def line(self) -> str:
        bots = f"{self.bots} bot{'s' if self.bots != 1 else ''} connected ({self.busy} busy)"
        matches = (
            f"{self.running} match{'es' if self.running != 1 else ''} running, "
            f"{self.finished} finished, {self.void} void since start"
        )
        text = f"{bots}; {matches}"
        if self.nodes is not None:
            text += (
                f"; {self.nodes} node{'s' if self.nodes != 1 else ''} "
                f"({self.used}/{self.capacity} match slots)"
            )
        return text


def ladder_status(ladder: Ladder) -> Status:
    """The ladder's status now (on its event loop: no database call)."""
    connected = ladder.referee.connected_bots()
    nodes = ladder.node_report() if ladder.nodes is not None else None
    return Status(
        bots=len(connected),
        busy=sum(1 for free in connected.values() if free <= 0),
        running=len(ladder.flights.flights),
        finished=ladder.flights.settled["finished"],
        void=ladder.flights.settled["void"],
        nodes=None if nodes is None else len(nodes),
        used=sum(int(n["matches"]) for n in nodes or []),
        capacity=sum(int(n["capacity"]) for n in nodes or []),
    )


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class StatusReporter:
    """Prints ``status()`` every ``every_s`` seconds (an unchanged line only every
    `QUIET_REPEAT` periods) and, at `stop`, a summary of the run."""

    def __init__(
        self,
        status: Callable[[], Status],
        every_s: float,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.status = status
        self.every_s = every_s
        self.out = out
        self.clock = clock
        self.started = clock()
        self.most_bots = 0
        self._last = ""
        self._unchanged = 0
        self._task: asyncio.Task[None] | None = None

    def _print(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # stdout gone: the ladder plays on
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.out or sys.stdout, flush=True)

    def tick(self) -> None:
        """One period: print the line unless it is the same as the last one printed."""
        line = self.sample().line()
        if line == self._last and self._unchanged + 1 < QUIET_REPEAT:
            self._unchanged += 1
            return
        self._last, self._unchanged = line, 0
        self._print(f"status: {line}")

    def sample(self) -> Status:
        now = self.status()
        self.most_bots = max(self.most_bots, now.bots)
        return now

    async def _run(self) -> None:
        """Samples every few seconds (the summary's most bots at once), prints every period."""
        step = min(self.every_s, SAMPLE_S) if self.every_s > 0 else SAMPLE_S
        due = self.clock() + self.every_s
        while True:
            await asyncio.sleep(step)
            if self.every_s > 0 and self.clock() >= due:
                due += self.every_s
                self.tick()
            else:
                self.sample()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="status line")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def summary(self) -> str:
        """The run in one line, for the exit (after the ladder stopped)."""
        now = self.sample()
        most = self.most_bots
        left = f", {now.running} left in flight" if now.running else ""
        return (
            f"ladder stopped after {_duration(self.clock() - self.started)}: "
            f"{now.finished} match{'es' if now.finished != 1 else ''} finished, "
            f"{now.void} void{left}; at most {most} bot{'s' if most != 1 else ''} "
            f"connected at once"
        )

    def print_summary(self) -> None:
        self._print(self.summary())
