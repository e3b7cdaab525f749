"""``ladder serve --nodes N``: N referee node processes on this machine, one per core.

For the operator with one machine and many cores: each node is a ``scout-arena referee serve
--join`` child on its own free port of the ladder's host, with its own records directory; the
node token goes to it in its environment (never on a command line others can read). A node
that exits on its own is started again after a pause (the ladder voids what it was playing and
seats its bots elsewhere meanwhile). The nodes die with the ladder, even one killed with
SIGKILL (`scout_arena.sandbox.lifeline`): orphans would re-attach to the next ladder. On stop
the nodes are stopped first, while the ladder can still hear their last reports, and the
ladder then stops as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from scout_arena.sandbox.lifeline import lifeline_env
from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS

log = logging.getLogger("scout_ladder.nodes")

RESTART_PAUSE_S = 1.0
STOP_TIMEOUT_S = 30.0


@dataclass(eq=False)
class LocalNode:
    index: int
    process: asyncio.subprocess.Process | None = None
    address: str | None = None
    starts: int = 0
    log_path: Path | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class LocalNodes:
    """Starts, watches and stops the ladder's local node processes."""

    def __init__(self, count: int, ladder: str, token: str, host: str, records: Path, *,
                 capacity: int = 100, decision_ms: int = DEFAULT_DECISION_MS,
                 time_bank_ms: int = DEFAULT_TIME_BANK_MS,
                 verbose: bool = False, tls: tuple[str, str] | None = None,
                 hosting: bool = True, hosted_data_mb: int = 16) -> None:
        """``tls``: the ladder's (certificate, key). The nodes then serve bots over TLS with
        them too, and trust that certificate for the ladder (a self-signed one, or set up
        remote-style nodes yourself: docs/deploy.md#nodes)."""
        if count < 1:
            raise ValueError("--nodes: at least 1")
        self.ladder = ladder
        self.token = token
        self.host = host
        self.records = records
        self.capacity = capacity
        self.decision_ms = decision_ms
        self.time_bank_ms = time_bank_ms
        self.verbose = verbose
        self.tls = tls
        self.hosting = hosting
        """The nodes host bots where the machine can run the sandbox (each probes it)."""
        self.hosted_data_mb = hosted_data_mb
        self.nodes = [LocalNode(i) for i in range(count)]
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self, timeout_s: float = 60.0) -> list[str]:
        """Start every node and wait until each listens; returns their addresses."""
        self.records.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            self._watchers.append(asyncio.create_task(self._keep(node),
                                                      name=f"local node {node.index}"))
        await asyncio.wait_for(asyncio.gather(*(n.ready.wait() for n in self.nodes)), timeout_s)
        return [n.address or "" for n in self.nodes]

    async def _spawn(self, node: LocalNode) -> None:
        name = f"local-{node.index}"
        records = self.records / name
        records.mkdir(parents=True, exist_ok=True)
        node.log_path = self.records / f"{name}.log"
        log_file = node.log_path.open("ab")
        argv = [sys.executable, "-m", "scout_arena.cli", "referee", "serve",
                "--host", self.host, "--port", "0", "--records", str(records),
                "--join", self.ladder, "--node-name", name, "--capacity", str(self.capacity),
                "--decision-ms", str(self.decision_ms),
                "--time-bank-ms", str(self.time_bank_ms), *(["-v"] if self.verbose else []),
                *(["--hosted-data-mb", str(self.hosted_data_mb)] if self.hosting
                  else ["--no-hosting"])]
        if self.tls is not None:
            cert, key = self.tls
            argv += ["--tls-cert", cert, "--tls-key", key, "--ladder-ca", cert]
        env = {**os.environ, "SCOUT_NODE_TOKEN": self.token,
               "SCOUT_REFEREE_ADMIN_TOKEN": self.token, **lifeline_env()}
        # stdin is the node's lifeline: the ladder never writes to it, and its death closes
        # it (and signals the node): no node outlives a ladder killed with SIGKILL.
        node.process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=log_file, env=env)
        log_file.close()
        node.starts += 1
        assert node.process.stdout is not None
        while line := await node.process.stdout.readline():
            text = line.decode(errors="replace").strip()
            if text.startswith("referee listening on "):
                node.address = text.removeprefix("referee listening on ")
                node.ready.set()
                log.info("local node %s listening on %s (log %s)", name, node.address,
                         node.log_path)
                break

    async def _keep(self, node: LocalNode) -> None:
        while not self._stopping:
            await self._spawn(node)
            process = node.process
            assert process is not None
            if process.stdout is not None:
                with contextlib.suppress(Exception):
                    while await process.stdout.readline():
                        pass
            code = await process.wait()
            if self._stopping:
                return
            log.error("local node %d exited with status %s; starting it again in %g s (see %s)",
                      node.index, code, RESTART_PAUSE_S, node.log_path)
            await asyncio.sleep(RESTART_PAUSE_S)

    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes if n.process is not None]

    async def stop(self) -> None:
        """SIGTERM every node (each aborts its matches and reports them), wait for them."""
        self._stopping = True
        running = [n.process for n in self.nodes
                   if n.process is not None and n.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("local node %d did not stop in %g s; killing it", process.pid,
                          STOP_TIMEOUT_S)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
