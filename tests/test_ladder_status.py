"""`ladder serve` tells its operator what it does: a status line every ``--status-every``
seconds (bots connected, matches running and settled, nodes), quiet while nothing changes,
and a summary when it stops."""

from __future__ import annotations

import io
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from scout_ladder.repository import Repository
from scout_ladder.status import QUIET_REPEAT, Status, StatusReporter

CLI = [sys.executable, "-m", "scout_arena.cli"]


def test_status_line_says_bots_matches_and_nodes() -> None:
    assert Status(3, 1, 2, 10, 1, None).line() == (
        "3 bots connected (1 busy); 2 matches running, 10 finished, 1 void since start"
    )
    assert Status(1, 0, 1, 0, 0, 2, used=1, capacity=200).line() == (
        "1 bot connected (0 busy); 1 match running, 0 finished, 0 void since start; "
        "2 nodes (1/200 match slots)"
    )


def test_an_unchanged_line_is_not_repeated_every_period() -> None:
    now = [Status(2, 0, 0, 0, 0, None)]
    clock = [0.0]
    out = io.StringIO()
    reporter = StatusReporter(lambda: now[0], 60, out=out, clock=lambda: clock[0])
    for _ in range(QUIET_REPEAT + 1):
        reporter.tick()
    assert out.getvalue().count("status: ") == 2  # the first, then once after the quiet spell
    now[0] = Status(4, 2, 2, 1, 0, None)
    reporter.tick()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].endswith(
        "status: 4 bots connected (2 busy); 2 matches running, 1 finished, 0 void since start"
    )
    now[0] = Status(0, 0, 0, 7, 2, None)
    clock[0] = 3725.0
    assert reporter.summary() == (
        "ladder stopped after 1 h 2 min: 7 matches finished, 2 void; "
        "at most 4 bots connected at once"
    )


def _serve(db: str, tmp_path: Path, every: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    process = subprocess.Popen(
        [
            *CLI,
            "ladder",
            "serve",
            "--database",
            db,
            "--port",
            "0",
            "--table-sizes",
            "2",
            "--admin-token",
            "adm",
            "--seed",
            "4",
            "--status-every",
            every,
        ],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / f"ladder-{every}.log").open("w"),
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def _next(lines: queue.Queue[str], pattern: str, timeout: float = 120) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        found = re.search(pattern, line)
        if found:
            return found


@pytest.mark.timeout(300)
def test_ladder_serve_prints_its_status_and_a_summary_at_exit(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ladder.db'}"
    repo = Repository(db)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in ("r1", "r2")}
    repo.close()
    ladder, lines = _serve(db, tmp_path, "0.5")
    bots: list[subprocess.Popen[bytes]] = []
    try:
        address = _next(lines, r"listening on (\S+)").group(1)
        _next(lines, r"status: 0 bots connected \(0 busy\); 0 matches running, 0 finished")
        for token in tokens.values():
            env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token}
            bots.append(
                subprocess.Popen(
                    [*CLI, "bot", "run", "random"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        _next(
            lines,
            r"status: 2 bots connected \(\d busy\); \d+ match(es)? running, "
            r"[1-9]\d* finished, \d+ void since start",
        )
        for bot in bots:
            bot.terminate()
            bot.wait(60)
        ladder.send_signal(signal.SIGTERM)
        summary = _next(
            lines,
            r"ladder stopped after .*: (\d+) match(es)? finished, (\d+) void"
            r".*; at most 2 bots connected at once",
        )
        assert int(summary.group(1)) >= 1
        assert ladder.wait(60) == 0
    finally:
        processes: list[subprocess.Popen[Any]] = [*bots, ladder]
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(60)

    quiet, lines = _serve(db, tmp_path, "0")
    try:
        _next(lines, r"listening on")
        time.sleep(1.5)
        quiet.send_signal(signal.SIGTERM)
        assert quiet.wait(60) == 0
    finally:
        if quiet.poll() is None:
            quiet.kill()
    rest: list[str] = []
    while not rest or "ladder stopped after" not in rest[-1]:
        rest.append(lines.get(timeout=30))
    assert not any("status:" in line for line in rest)
