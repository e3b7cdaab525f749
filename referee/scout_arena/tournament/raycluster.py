"""A small Ray cluster on this machine's loopback addresses, started and stopped with `ray start`:
for the tests, the benchmarks and trying ``--ray`` without a cluster.

Every node is a ``ray start --block`` process group of its own (its raylet, agents and workers),
with its own ``--temp-dir``, explicit ports and a small object store, so that several clusters
can run side by side and one node can be killed alone. Nodes listen on 127.0.0.N with N >= 2:
Ray replaces 127.0.0.1 given as ``--node-ip-address`` by the machine's outward address, which
would take the traffic off the loopback interface.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

OBJECT_STORE_BYTES = 80 * 1024 * 1024
WORKER_PORTS = 40
READY_LINE = b"will now block forever"
#: A loaded machine starts Ray's agents slowly; the raylet gives up waiting for them after a few
#: seconds by default, and exits.
SLOW_MACHINE_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_raylet_start_wait_time_s": "120",
                    "RAY_agent_register_timeout_ms": "120000",
                    "RAY_gcs_server_port_wait_time_s": "120"}


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _free_range(count: int) -> int:
    """The first of ``count`` consecutive ports below the ephemeral range, all free now."""
    for _ in range(200):
        base = random.randrange(15_000, 32_000 - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free range of worker ports")


@dataclass
class RayNode:
    """One ``ray start --block`` process group."""

    ip: str
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log: Path
    head: bool

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole node at once (raylet, agents and workers, which Ray puts in process
        groups of their own): a node that dies."""
        for pid, _ in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def diagnosis(self) -> str:
        """The end of ``ray start``'s output and the raylet's own complaints."""
        parts = [self.log.read_bytes().decode(errors="replace")[-1500:]]
        for name in ("raylet.out", "raylet.err"):
            path = self.temp_dir / "session_latest" / "logs" / name
            if path.exists():
                lines = [line for line in path.read_text(errors="replace").splitlines()
                         if not line.startswith((" ", "/"))]
                parts.append(f"--- {name}:\n" + "\n".join(lines[-12:]))
        return "\n".join(parts)

    def processes(self) -> list[tuple[int, str]]:
        """(pid, command line) of every live process the node started, at any depth."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                fields = stat.rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    children.setdefault(int(fields[1]), []).append(int(entry.name))
        found = []
        todo = list(children.get(self.process.pid, []))
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, []))
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
        return found


@dataclass
class LocalRayCluster:
    """A head node and any number of worker nodes on 127.0.0.N, under one temporary folder.

    ``start()`` starts the head; ``add_worker()`` one more node; ``address`` is what
    ``ray.init`` / ``--ray`` take; ``stop()`` kills every node and removes the folder."""

    num_cpus: int = 1
    ray: str = field(default_factory=lambda: str(Path(sys.executable).parent / "ray"))
    timeout_s: float = 180.0
    nodes: list[RayNode] = field(default_factory=list)
    address: str = ""
    root: Path | None = None
    _next_ip: int = 0

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RayNode:
        # A short root: Ray's unix socket paths under it must stay within 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
        self._next_ip = random.randrange(2, 200)
        port = _free_port()
        head = self._start_node(["--head", "--port", str(port), "--include-dashboard", "false",
                                 "--dashboard-port", str(_free_port()),
                                 "--ray-client-server-port", str(_free_port())], head=True)
        self.address = f"{head.ip}:{port}"
        return head

    def add_worker(self, num_cpus: int | None = None) -> RayNode:
        return self._start_node(["--address", self.address], head=False, num_cpus=num_cpus)

    def _start_node(self, extra: list[str], *, head: bool, num_cpus: int | None = None
                    ) -> RayNode:
        """Start a node; on a loaded machine Ray's raylet sometimes gives up waiting for its
        agents (a fixed 15 s), so a node that does not come up is tried again, twice."""
        for attempt in range(3):
            try:
                return self._try_node(extra, head=head, num_cpus=num_cpus, attempt=attempt)
            except RuntimeError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _try_node(self, extra: list[str], *, head: bool, num_cpus: int | None,
                  attempt: int) -> RayNode:
        assert self.root is not None, "start() first"
        ip = f"127.0.0.{self._next_ip + len(self.nodes)}"
        temp_dir = self.root / f"n{len(self.nodes)}-{attempt}"
        temp_dir.mkdir()
        log = self.root / f"n{len(self.nodes)}-{attempt}.log"
        base = _free_range(WORKER_PORTS)
        args = [self.ray, "start", "--block", "--node-ip-address", ip,
                "--num-cpus", str(num_cpus or self.num_cpus), "--temp-dir", str(temp_dir),
                "--object-store-memory", str(OBJECT_STORE_BYTES), "--disable-usage-stats",
                "--include-log-monitor", "false",
                "--node-manager-port", str(_free_port()),
                "--object-manager-port", str(_free_port()),
                "--min-worker-port", str(base), "--max-worker-port", str(base + WORKER_PORTS - 1),
                "--dashboard-agent-listen-port", str(_free_port()),
                "--dashboard-agent-grpc-port", str(_free_port()),
                "--runtime-env-agent-port", str(_free_port()),
                "--metrics-export-port", str(_free_port()), *extra]
        env = {**os.environ, **SLOW_MACHINE_ENV}
        env.pop("RAY_ADDRESS", None)
        with log.open("wb") as out:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)
        node = RayNode(ip, temp_dir, process, log, head)
        deadline = time.monotonic() + self.timeout_s
        while READY_LINE not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                node.kill()
                raise RuntimeError(f"ray node {ip} did not start:\n{node.diagnosis()}")
            time.sleep(0.2)
        self.nodes.append(node)
        return node

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        self.nodes.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
