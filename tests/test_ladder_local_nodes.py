"""``ladder serve --nodes 2`` as an operator runs it: real processes on 127.0.0.1, SQLite.

Issue 30: the local nodes outlived a ladder killed with SIGKILL (and re-attached to the next
one); the second node stayed idle while the first had room (placement followed the bots'
last node within 10 % of load); a lost node vanished from the ladder's view of its nodes.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scout_ladder.repository import Repository
from test_ladder_processes import wait_for

CLI = [sys.executable, "-m", "scout_arena.cli"]
ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for its new parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def node_logs(tmp: Path) -> str:
    """The nodes' stderr (a node whose stop hangs writes its stacks there, see lifeline)."""
    return "".join(f"\n--- {log.name}\n{log.read_text()[-4000:]}"
                   for log in sorted((tmp / "nodes").glob("*.log")))


@dataclass
class Ladder:
    """A ``ladder serve --nodes 2`` on SQLite, its stdout lines queued, and bots."""

    tmp: Path
    url: str
    process: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    bots: list[subprocess.Popen[bytes]] = field(default_factory=list)
    address: str = ""
    web: str = ""

    def expect(self, text: str, timeout: float = 120) -> str:
        while text not in (line := self.lines.get(timeout=timeout)):
            pass
        return line

    def start_bot(self, name: str, token: str) -> None:
        log = (self.tmp / f"bot-{name}.log").open("a")
        self.bots.append(subprocess.Popen(
            [*CLI, "bot", "run", "random"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "SCOUT_ADDRESS": self.address, "SCOUT_TOKEN": token,
                 "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "2"}))

    def close(self) -> None:
        for bot in self.bots:
            bot.terminate()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for bot in self.bots:
            try:
                bot.wait(30)
            except subprocess.TimeoutExpired:
                bot.kill()


def start_ladder(tmp: Path, *extra: str) -> Ladder:
    url = f"sqlite:///{tmp / 'ladder.db'}"
    process = subprocess.Popen(
        [*CLI, "ladder", "serve", "--database", url, "--port", "0", "--admin-token", "adm",
         "--nodes", "2", "--node-records", str(tmp / "nodes"), *extra],
        stdout=subprocess.PIPE, stderr=(tmp / "ladder.log").open("w"), text=True)
    ladder = Ladder(tmp, url, process)

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            ladder.lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return ladder


@pytest.fixture
def ladder(tmp_path: Path) -> Iterator[Ladder]:
    running = start_ladder(tmp_path, "--table-sizes", "2", "--seed", "3", "--web-port", "0")
    try:
        running.address = running.expect("listening on").rsplit(" ", 1)[1].strip()
        running.expect("local referee nodes on")
        running.web = running.expect("web pages on").rsplit(" ", 1)[1].strip().rstrip("/")
        yield running
    finally:
        running.close()


def test_no_local_node_outlives_a_ladder_killed_with_sigkill(tmp_path: Path) -> None:
    running = start_ladder(tmp_path)
    nodes: list[int] = []
    try:
        running.expect("local referee nodes on")
        nodes = children_of(running.process.pid)
        assert len(nodes) == 2, nodes
        assert all(alive(pid) for pid in nodes)
        running.process.send_signal(signal.SIGKILL)
        running.process.wait(30)
        deadline = time.monotonic() + 60
        while any(alive(pid) for pid in nodes) and time.monotonic() < deadline:
            time.sleep(0.2)
        survivors = [pid for pid in nodes if alive(pid)]
        logs = node_logs(tmp_path)
        assert not survivors, f"local nodes {survivors} outlived their ladder{logs}"
        assert "did not stop within" not in logs, f"a node's stop hung:{logs}"
    finally:
        running.close()
        for pid in nodes:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_both_local_nodes_play_from_the_first_matches_at_the_default_capacity(
        ladder: Ladder) -> None:
    repo = Repository(ladder.url)
    try:
        for i in range(4):
            ladder.start_bot(f"b{i}", repo.register_bot(f"b{i}", f"owner-{i}")[1])

        def finished() -> list[str]:
            summaries = sorted(repo.list_matches(limit=1000, status="finished"),
                               key=lambda m: m.finished_at or 0)
            return [m.match_id for m in summaries]

        wait_for(lambda: len(finished()) >= 10, 180, "10 finished matches")
        first = finished()[:10]
        nodes = Counter(json.loads(repo.get_record(m) or "{}")["meta"]["node"] for m in first)
        assert sorted(nodes) == ["local-0", "local-1"], nodes
        assert min(nodes.values()) >= 2, nodes
    finally:
        repo.close()


def test_a_lost_node_stays_listed_as_lost_with_its_reason_and_the_cli_shows_it(
        ladder: Ladder) -> None:
    def nodes() -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{ladder.web}/api/nodes", timeout=10) as reply:
            listed: list[dict[str, Any]] = json.loads(reply.read())["nodes"]
        return listed

    wait_for(lambda: len(nodes()) == 2, 60, "both local nodes attached")
    assert {n["state"] for n in nodes()} == {"attached"}
    victim = children_of(ladder.process.pid)[0]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: any(n["state"] == "lost" for n in nodes()), 60, "the node listed as lost")
    [lost] = [n for n in nodes() if n["state"] == "lost"]
    assert lost["lost_reason"] and lost["lost_at_iso"].endswith("+00:00")
    # the ladder starts it again (a new node on a new port); the lost one stays listed
    wait_for(lambda: sum(n["state"] == "attached" for n in nodes()) == 2, 60, "a new node")
    shown = subprocess.run([*CLI, "ladder", "nodes", "--web", ladder.web], capture_output=True,
                           text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 3
    assert sum(" attached " in line for line in lines) == 2
    [lost_line] = [line for line in lines if " lost at " in line]
    assert lost["address"] in lost_line and lost["lost_reason"] in lost_line


def test_ladder_nodes_of_an_unreachable_ladder_is_one_line_and_status_1() -> None:
    shown = subprocess.run([*CLI, "ladder", "nodes", "--web", "http://127.0.0.1:9"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 1
    assert len(shown.stderr.splitlines()) == 1
    assert shown.stderr.startswith("scout-arena ladder nodes: cannot read ")
