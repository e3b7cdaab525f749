"""A ladder match has one id from the moment it is planned to its result: the id its row is
written under while in flight is the one its live view, its record and its result have, so an
id copied early never disappears. A void match is not shown as rated.

The ladder as a real process with its web pages, two bots that think a little before each move
(so that a match is in flight long enough to be seen), on SQLite: the id does not depend on the
database.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from scout_ladder.repository import Repository

CLI = [sys.executable, "-m", "scout_arena.cli"]
SLOW_BOT = Path(__file__).parent / "bots" / "slow_bot.py"
LADDER_ID = re.compile(r"m-[0-9a-f]{16}")
pytestmark = pytest.mark.timeout(300)


def _wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def _read_lines(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)


def _banner(lines: queue.Queue[str], *wanted: str) -> dict[str, str]:
    """The value after each of ``wanted`` in the first lines the ladder prints."""
    found: dict[str, str] = {}
    while len(found) < len(wanted):
        line = lines.get(timeout=120)
        for key in wanted:
            if key in line:
                found[key] = line.split(key, 1)[1].strip()
    return found


def test_a_match_keeps_its_id_from_start_to_end(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ladder.db'}"
    repo = Repository(db)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in ("s1", "s2")}
    ladder = subprocess.Popen(
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
            "--web-port",
            "0",
            "--admin-token",
            "adm",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "ladder.log").open("w"),
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(ladder, lines), daemon=True).start()
    bots: list[subprocess.Popen[bytes]] = []
    try:
        banner = _banner(lines, "listening on", "web pages on")
        address, web = banner["listening on"], banner["web pages on"].rstrip("/")
        for name, token in tokens.items():
            env = {
                **os.environ,
                "SCOUT_ADDRESS": address,
                "SCOUT_TOKEN": token,
                "SCOUT_CONCURRENCY": "1",
                "SLOW_BOT_DELAY_S": "0.05",
            }
            bots.append(
                subprocess.Popen(
                    [*CLI, "bot", "run", f"{SLOW_BOT}:SlowBot"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=(tmp_path / f"{name}.log").open("w"),
                )
            )

        def in_flight() -> list[str]:
            return [m.match_id for m in repo.list_matches(limit=100, status="in_flight")]

        _wait_for(in_flight, 120, "a match in flight")
        [early] = in_flight()
        assert LADDER_ID.fullmatch(early), early
        # the id copied from the match list is the one the live view plays under
        _wait_for(
            lambda: early in [m["match_id"] for m in httpx.get(f"{web}/api/live").json()],
            60,
            "the match in the live view",
        )
        listed = {m["match_id"]: m for m in httpx.get(f"{web}/api/matches").json()}
        assert listed[early]["status"] == "in_flight"
        # ... and the one its result and record are stored under
        _wait_for(
            lambda: (m := repo.get_match(early)) is not None and m.status == "finished",
            120,
            f"{early} finished",
        )
        record = json.loads(repo.get_record(early) or "{}")
        assert record["match_id"] == early
        assert httpx.get(f"{web}/api/matches/{early}/replay").status_code == 200
        # a match stopped with the ladder is void, under its id too, and not shown as rated
        _wait_for(lambda: [m for m in in_flight() if m != early], 120, "a second match")
        ladder.send_signal(signal.SIGTERM)
        assert ladder.wait(120) == 0
    finally:
        processes: list[subprocess.Popen[Any]] = [*bots, ladder]
        for process in processes:
            if process.poll() is None:
                process.terminate()
            process.wait(60)
    matches = repo.list_matches(limit=100)
    assert all(LADDER_ID.fullmatch(m.match_id) for m in matches)
    void = [m for m in matches if m.status == "void"]
    assert void and all(m.rated for m in void)  # planned as rated, never rated: void
    shown = subprocess.run(
        [*CLI, "ladder", "matches", "--database", db],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "300"},
    ).stdout
    for m in void:
        row = next(line for line in shown.splitlines() if m.match_id in line)
        assert "no (void)" in row and " yes " not in row
    finished = next(line for line in shown.splitlines() if early in line)
    assert " yes " in finished
    repo.close()
