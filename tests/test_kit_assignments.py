"""Conformance: the Python SDK and every starter kit follow MatchAssignments (PROTOCOL.md §3.8).

A main referee sends each bot a MatchAssignment for a match that a node referee hosts
(tests/support/assigning.py plays the ladder's part). The bot must open a stream to the node
with the ticket, play the match there with no forfeit, reuse that stream for later (and
concurrent) matches, reopen it with a live ticket when its connection is cut mid-match, and
stay connected to its main referee throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from referee_support import SCOUT_ARENA, DroppingProxy, stop
from scout_arena.record import record_from_json, replay
from support.kits import KITS, require

# The first test that needs a kit builds every kit the session needs, side by side (cold: minutes;
# tests/support/kits.py).
pytestmark = pytest.mark.timeout(1200)
ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).resolve().parent / "support" / "assigning.py"
SUBJECTS = ["python", *KITS]
TOKENS = {name: f"{name}-token" for name in SUBJECTS} | {"py-greedy": "pyg", "py-random": "pyr"}


class Harness:
    """The main + node referees process, driven by JSON lines."""

    def __init__(self, tmp_path: Path) -> None:
        self.log = (tmp_path / "harness.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(HARNESS), json.dumps(TOKENS)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
        first = self._read()
        self.main, self.node = first["main"], first["node"]
        self.ended: dict[str, dict[str, Any]] = {}
        self.bots: list[subprocess.Popen[str]] = []

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError("the harness exited")
        return dict(json.loads(line))

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def connected(self) -> dict[str, list[str]]:
        self.send({"connected": True})
        while True:
            message = self._read()
            if "connected_main" in message:
                return message
            self._keep(message)

    def _keep(self, message: dict[str, Any]) -> None:
        if "ended" in message:
            self.ended[message["ended"]] = message["record"]
        elif "failed" in message:
            raise AssertionError(f"match {message['failed']} could not start: {message['why']}")

    def wait_connected(self, names: list[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if set(names) <= set(self.connected()["connected_main"]):
                return
            time.sleep(0.2)
        raise AssertionError(f"bots {names} did not connect to the main referee")

    def wait_ended(self, match_ids: list[str], timeout: float = 120.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not set(match_ids) <= set(self.ended):
            if time.monotonic() > deadline:
                raise AssertionError(f"matches {set(match_ids) - set(self.ended)} did not end")
            self._keep(self._read())
        return [self.ended[m] for m in match_ids]

    def close(self) -> None:
        for bot in self.bots:
            stop(bot)
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        h.close()


def start_subject(h: Harness, name: str, built: dict[str, str], log_dir: Path,
                  *extra: str) -> None:
    env = {**os.environ, "SCOUT_ADDRESS": h.main, "SCOUT_TOKEN": TOKENS[name],
           "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "4"}
    env.pop("SCOUT_PUBLIC_EVENTS", None)
    if name == "python":
        command = [*SCOUT_ARENA, "bot", "run", "random"]
    else:
        command = list(require(built, name).command)
    log = (log_dir / f"{name}-{time.monotonic_ns()}.log").open("w")
    h.bots.append(subprocess.Popen([*command, *extra], cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, text=True))


def start_python(h: Harness, spec: str, token: str, log_dir: Path) -> None:
    env = {**os.environ, "SCOUT_ADDRESS": h.main, "SCOUT_TOKEN": token}
    log = (log_dir / f"{spec}-{time.monotonic_ns()}.log").open("w")
    h.bots.append(subprocess.Popen([*SCOUT_ARENA, "bot", "run", spec], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, text=True))


def check_played(record: dict[str, Any], name: str) -> None:
    assert record["finished"], record.get("notes")
    assert record["forfeits"] == [], record["notes"]
    seat = [p["name"] for p in record["players"]].index(name)
    assert not [n for n in record["notes"] if n["seat"] == seat and n["kind"] == "timeout"], \
        record["notes"]
    replay(record_from_json(record))


@pytest.mark.parametrize("name", SUBJECTS)
def test_bot_follows_assignments_to_a_node_and_reuses_its_stream_there(
        name: str, built_kits: dict[str, str], harness: Harness, tmp_path: Path) -> None:
    start_subject(harness, name, built_kits, tmp_path)
    start_python(harness, "greedy", "pyg", tmp_path)
    start_python(harness, "random", "pyr", tmp_path)
    harness.wait_connected([name, "py-greedy", "py-random"])
    harness.send({"assign": "m-first", "bots": [name, "py-greedy", "py-random"], "seed": 3})
    (first,) = harness.wait_ended(["m-first"])
    check_played(first, name)
    # Two at once, at two tables: both on the one node stream the bot holds now.
    harness.send({"assign": "m-second", "bots": ["py-greedy", name], "seed": 4})
    harness.send({"assign": "m-third", "bots": [name, "py-random"], "seed": 5})
    for record in harness.wait_ended(["m-second", "m-third"]):
        check_played(record, name)
    seen = harness.connected()
    assert name in seen["connected_main"], "the bot left its main referee"
    assert name in seen["connected_node"], "the bot did not keep its node stream"


@pytest.mark.parametrize("name", SUBJECTS)
def test_bot_reopens_a_cut_node_stream_with_its_ticket_and_finishes_the_match(
        name: str, built_kits: dict[str, str], harness: Harness, tmp_path: Path) -> None:
    proxy = DroppingProxy(harness.node)
    try:
        start_subject(harness, name, built_kits, tmp_path)
        start_python(harness, "greedy", "pyg", tmp_path)
        harness.wait_connected([name, "py-greedy"])
        harness.send({"assign": "m-cut", "bots": [name, "py-greedy"], "seed": 6,
                      "address": proxy.address, "decision_ms": 2000, "time_bank_ms": 5000})
        deadline = time.monotonic() + 30
        while name not in harness.connected()["connected_node"]:
            assert time.monotonic() < deadline, "the bot never reached the node"
            time.sleep(0.1)
        proxy.drop_all()
        (record,) = harness.wait_ended(["m-cut"])
        assert proxy.connections >= 2, "the bot never reopened its node stream"
        seat = [p["name"] for p in record["players"]].index(name)
        kinds = [n["kind"] for n in record["notes"] if n["seat"] == seat]
        assert "reconnect" in kinds, record["notes"]
        check_played(record, name)
        assert name in harness.connected()["connected_main"]
    finally:
        proxy.close()
