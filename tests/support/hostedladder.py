"""A ladder process that hosts bots, and its owners' CLI, for the end-to-end hosting tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from scout.v1 import owners_pb2, owners_pb2_grpc

CLI = [sys.executable, "-m", "scout_arena.cli"]
ADMIN = "hosting-admin-token"


@dataclass
class Ladder:
    process: subprocess.Popen[str]
    address: str
    log: Path
    tmp: Path

    def cli(self, *args: str, owner_token: str | None = None, admin: bool = False,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {**os.environ}
        if owner_token is not None:
            env["SCOUT_OWNER_TOKEN"] = owner_token
        extra = ["--admin-token", ADMIN] if admin else []
        return subprocess.run([*CLI, "ladder", *args, "--address", self.address, *extra],
                              capture_output=True, text=True, env=env, timeout=timeout)

    def signup(self, owner: str) -> str:
        done = self.cli("signup", owner)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    def remote_bot(self, name: str) -> str:
        """A remote bot of an owner of its own, made over gRPC (quicker than the CLI, which
        the tests use where it is the point); its token."""
        with grpc.insecure_channel(self.address) as channel:
            stub = owners_pb2_grpc.OwnersStub(channel)
            owner = stub.Signup(owners_pb2.SignupRequest(name=f"owner-of-{name}"), timeout=30)
            return stub.RegisterBot(owners_pb2.RegisterOwnedBotRequest(name=name), metadata=(
                ("authorization", f"Bearer {owner.owner_token}"),), timeout=30).token


@contextmanager
def hosting_ladder(db: str, tmp: Path, *extra: str) -> Iterator[Ladder]:
    log = tmp / "ladder.log"
    process = subprocess.Popen(
        [*CLI, "ladder", "serve", "--database", db, "--port", "0", "--table-sizes", "2,3",
         "--decision-ms", "1000", "--time-bank-ms", "5000", "--reconnect-grace", "3",
         "--admin-token", ADMIN, "--registration", "open", "--storage", str(tmp / "storage"),
         "--hosting-dir", str(tmp / "hosting"), "--seed", "11", "-v", *extra],
        stdout=subprocess.PIPE, stderr=log.open("a"), text=True)
    assert process.stdout is not None
    address = ""
    while not address:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the ladder did not start:\n{log.read_text()}")
        found = re.search(r"listening on (\S+)", line)
        if found:
            address = found.group(1)
    try:
        yield Ladder(process, address, log, tmp)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def remote_bots(address: str, tokens: dict[str, str], kind: str = "greedy"
                ) -> list[subprocess.Popen[str]]:
    processes = []
    for token in tokens.values():
        env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
               "SCOUT_CONCURRENCY": "2"}
        processes.append(subprocess.Popen([*CLI, "bot", "run", kind], env=env,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, text=True))
    return processes


def stop(processes: Sequence[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise TimeoutError(what)
