"""Children tied to their parent's life (`scout_arena.sandbox.lifeline`), as real processes.

Issue 30: the local nodes of a ``ladder serve --nodes 2`` killed with SIGKILL kept running
and re-attached to the next ladder. Now no node outlives its ladder, whichever tie fires.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from scout_arena.sandbox.lifeline import lifeline_env

CHILD = ("from scout_arena.sandbox.lifeline import hold_lifeline; import time; "
         "assert hold_lifeline(); print('held', flush=True); time.sleep(120)")


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


def wait_gone(pids: list[int], timeout_s: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_a_child_whose_lifeline_pipe_closes_is_stopped_with_sigterm() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **lifeline_env()})
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "held\n"
        assert child.poll() is None
        assert child.stdin is not None
        child.stdin.close()  # what the parent's death does to the pipe
        assert child.wait(30) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_child_without_a_lifeline_holds_none() -> None:
    from scout_arena.sandbox.lifeline import hold_lifeline

    assert not hold_lifeline({})
    assert not hold_lifeline({"SCOUT_LIFELINE": "not:a-number"})


def test_no_local_node_outlives_a_ladder_killed_with_sigkill(tmp_path: Path) -> None:
    ladder = subprocess.Popen(
        [sys.executable, "-m", "scout_arena.cli", "ladder", "serve",
         "--database", f"sqlite:///{tmp_path / 'ladder.db'}", "--port", "0",
         "--admin-token", "adm", "--nodes", "2", "--node-records", str(tmp_path / "nodes")],
        stdout=subprocess.PIPE, stderr=(tmp_path / "ladder.log").open("w"), text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert ladder.stdout is not None
        for line in ladder.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    nodes: list[int] = []
    try:
        while "local referee nodes on" not in lines.get(timeout=120):
            pass
        nodes = children_of(ladder.pid)
        assert len(nodes) == 2, nodes
        assert all(alive(pid) for pid in nodes)
        ladder.send_signal(signal.SIGKILL)
        ladder.wait(30)
        assert wait_gone(nodes) == [], "a local node outlived its ladder"
    finally:
        if ladder.poll() is None:
            ladder.kill()
            ladder.wait()
        for pid in nodes:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
