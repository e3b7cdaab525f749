"""Helpers for end-to-end tests: real referee and bot processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from scout.v1 import game_pb2, matches_pb2, matches_pb2_grpc
from support.rawbot import bearer

ADMIN_TOKEN = "admin-secret"
SCOUT_ARENA = [sys.executable, "-m", "scout_arena.cli"]


@dataclass
class RefereeProcess:
    """A `scout-arena referee serve` subprocess and what it needs to be driven."""

    process: subprocess.Popen[str]
    address: str
    records: Path
    log_path: Path
    bots: list[subprocess.Popen[str]] = field(default_factory=list)

    def matches_stub(self) -> tuple[grpc.Channel, matches_pb2_grpc.MatchesStub]:
        channel = grpc.insecure_channel(self.address)
        return channel, matches_pb2_grpc.MatchesStub(channel)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def admin_metadata() -> tuple[tuple[str, str], ...]:
    return bearer(ADMIN_TOKEN)


def start_referee(tmp_path: Path, tokens: dict[str, str], *extra: str) -> RefereeProcess:
    """Start a referee on a free loopback port and wait until it says where it listens."""
    records = tmp_path / "records"
    log_path = tmp_path / f"referee-{time.monotonic_ns()}.log"
    args = [*SCOUT_ARENA, "referee", "serve", "--port", "0", "--records", str(records),
            "--admin-token", ADMIN_TOKEN, "-v", *extra]
    for name, token in tokens.items():
        args += ["--bot-token", f"{name}={token}"]
    log_file = log_path.open("w")
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log_file, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"listening on (\S+)", line)
    if match is None:
        process.kill()
        raise RuntimeError(f"referee did not start: {line!r}\n{log_path.read_text()}")
    return RefereeProcess(process, match.group(1), records, log_path)


def start_bot(referee: RefereeProcess, spec: str, token: str, *extra: str,
              log_dir: Path | None = None) -> subprocess.Popen[str]:
    """Start `scout-arena bot run SPEC` as its own process, connected to the referee."""
    env = {**os.environ, "SCOUT_ADDRESS": referee.address, "SCOUT_TOKEN": token}
    log_path = (log_dir or referee.records.parent) / f"bot-{token}-{time.monotonic_ns()}.log"
    process = subprocess.Popen([*SCOUT_ARENA, "bot", "run", spec, *extra], env=env,
                               stdout=subprocess.DEVNULL, stderr=log_path.open("w"), text=True)
    referee.bots.append(process)
    return process


def stop(process: subprocess.Popen[str], timeout: float = 10.0) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@contextlib.contextmanager
def running_referee(tmp_path: Path, tokens: dict[str, str], *extra: str
                    ) -> Iterator[RefereeProcess]:
    referee = start_referee(tmp_path, tokens, *extra)
    try:
        yield referee
    finally:
        for bot in referee.bots:
            stop(bot)
        stop(referee.process)


def wait_connected(referee: RefereeProcess, names: Sequence[str], timeout: float = 20.0) -> None:
    """Wait until the referee's log shows every named bot connected."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = referee.log()
        if all(f"bot {name} connected" in text for name in names):
            return
        time.sleep(0.05)
    raise TimeoutError(f"bots {list(names)} did not all connect:\n{referee.log()}")


def create_match(stub: matches_pb2_grpc.MatchesStub, bots: Sequence[str], seed: int,
                 decision_ms: int = 0, time_bank_ms: int | None = None
                 ) -> matches_pb2.MatchInfo:
    """``decision_ms`` 0 and ``time_bank_ms`` None take the referee's defaults; a
    ``time_bank_ms`` of 0 asks for a match with no bank (``no_time_bank``)."""
    request = matches_pb2.CreateMatchRequest(bots=list(bots), seed=seed)
    if decision_ms or time_bank_ms is not None:
        request.time_control.CopyFrom(game_pb2.TimeControl(
            decision_ms=decision_ms, time_bank_ms=time_bank_ms or 0,
            no_time_bank=time_bank_ms == 0))
    info: matches_pb2.MatchInfo = stub.CreateMatch(request, metadata=admin_metadata(), timeout=10)
    return info


def wait_finished(stub: matches_pb2_grpc.MatchesStub, match_id: str,
                  timeout: float = 60.0) -> matches_pb2.MatchInfo:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info: matches_pb2.MatchInfo = stub.GetMatch(
            matches_pb2.GetMatchRequest(match_id=match_id), metadata=admin_metadata(), timeout=5)
        if info.status != matches_pb2.MATCH_STATUS_RUNNING:
            return info
        time.sleep(0.05)
    raise TimeoutError(f"match {match_id} still running after {timeout} s")


def fetch_record(stub: matches_pb2_grpc.MatchesStub, match_id: str) -> dict[str, Any]:
    response = stub.GetRecord(matches_pb2.GetRecordRequest(match_id=match_id),
                              metadata=admin_metadata(), timeout=5)
    record: dict[str, Any] = json.loads(response.record_json)
    return record


def card_pairs(message: Any) -> set[tuple[int, int]]:
    """Every Card anywhere inside a protobuf message, as (low, high) deck pairs."""
    found: set[tuple[int, int]] = set()

    def walk(msg: Any) -> None:
        if isinstance(msg, game_pb2.Card):
            found.add((min(msg.face, msg.other), max(msg.face, msg.other)))
            return
        for descriptor, value in msg.ListFields():
            if descriptor.message_type is None:
                continue
            if descriptor.is_repeated:  # protobuf 7 dropped FieldDescriptor.label
                for item in value:
                    walk(item)
            else:
                walk(value)

    walk(message)
    return found


class DroppingProxy:
    """A loopback TCP proxy in its own thread that can cut every live connection at once, so
    a test can take a bot's network away mid-match without touching either process."""

    def __init__(self, upstream: str) -> None:
        import socket
        import threading

        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.connections = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
                self.connections += 1
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: Any, target: Any) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                with contextlib.suppress(OSError):
                    s.close()

    def drop_all(self) -> None:
        import socket

        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.drop_all()
