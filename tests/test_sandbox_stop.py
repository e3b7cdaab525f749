"""Stopping a hosted bot at any moment, in a real sandbox (the host is
tests/support/sandbox_host.py): the whole sandbox ends, nothing outside it is signalled, and a
pipe that outlives the kill is closed and logged rather than waited for."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scout_arena.sandbox import RunOutcome
from scout_arena.sandbox import process as sandbox_process
from scout_arena.sandbox.limits import DEFAULT_LIMITS
from scout_arena.sandbox.monitor import sandbox_procfs, sandbox_usage, tmpfs_used
from support.sandbox_host import (
    Host,
    host_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
    no_process_runs,
)


def test_a_sandbox_stopped_while_it_is_being_built_ends_whole_and_signals_nothing_else(
        host: Host) -> None:
    """Stops a moment after the start, while bwrap builds the sandbox: bwrap's child is then
    not yet bound to die with bwrap, and its /proc is still the host's."""
    marker = f"early-{os.getpid()}"
    bystander = subprocess.Popen(["sleep", "600"])

    async def one(index: int) -> RunOutcome:
        process = await host.start(
            "import time\ntime.sleep(3600)\n", name=f"early{index}",
            manifest=f'runtime = "python"\ncommand = ["python", "bot.py", "{marker}"]\n')
        await asyncio.sleep(index * 0.0002)
        return await asyncio.wait_for(process.stop(grace_s=0.1), 30)

    async def scenario() -> list[RunOutcome]:
        servers = [await host.serve(f"early{index}") for index in range(24)]
        try:
            return list(await asyncio.gather(*(one(index) for index in range(24))))
        finally:
            for server in servers:
                server.close()

    try:
        outcomes = asyncio.run(scenario())
        assert {outcome.reason for outcome in outcomes} == {"stopped after its match"}
        assert no_process_runs(marker)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_process_whose_root_is_still_the_hosts_has_no_sandbox_procfs() -> None:
    """A process alone in a new PID namespace, its root and /proc the host's, as bwrap's child
    is before it moves into the sandbox's root: nothing is measured through it."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    outer = subprocess.Popen(["unshare", *user, "--pid", "--fork", "sleep", "600"])
    try:
        children = f"/proc/{outer.pid}/task/{outer.pid}/children"
        for _ in range(500):
            with open(children) as file:
                if pids := file.read().split():
                    break
            time.sleep(0.01)
        init = f"/proc/{pids[0]}"
        assert os.readlink(f"{init}/ns/pid") != os.readlink("/proc/self/ns/pid")
        assert sandbox_procfs(init) is None
        assert sandbox_usage(init) is None and tmpfs_used(init) is None
        assert sandbox_procfs("/proc/self") is None
    finally:
        outer.kill()
        outer.wait()


ESCAPEE = "import time; print('ready', flush=True); time.sleep(600)"


def test_a_pipe_held_open_past_the_kill_is_closed_and_logged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A process outside bwrap's reach keeps the output pipe: stop returns anyway, and says so
    in the log (here a shell stands in for bwrap, its background child for the escapee)."""
    marker = f"escapee{os.getpid()}"
    monkeypatch.setattr(sandbox_process, "PIPE_GRACE_S", 0.3)

    async def scenario() -> sandbox_process.RunOutcome:
        read_fd, write_fd = os.pipe()
        os.close(write_fd)
        shell = await asyncio.create_subprocess_exec(
            "sh", "-c", f"{sys.executable} -c {ESCAPEE!r} {marker} & exec sleep 600",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        process = sandbox_process.HostedProcess(DEFAULT_LIMITS, shell, read_fd, None, tmp_path)
        while "ready" not in process.output_tail():
            await asyncio.sleep(0.02)
        return await asyncio.wait_for(process.stop(grace_s=0.1), 30)

    try:
        with caplog.at_level(logging.ERROR, logger=sandbox_process.__name__):
            outcome = asyncio.run(scenario())
        assert outcome.reason == "stopped after its match"
        assert outcome.signal == 9
        assert "output pipe is still open" in caplog.text
    finally:
        subprocess.run(["pkill", "-f", marker], check=False)
