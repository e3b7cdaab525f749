"""The ladder as real processes: one per database (a lease that dies with its holder), and a
clean stop that settles every row it owns. Both backends.

Bots: two random bots taking two matches each, and a raw bot that never answers, so that a
match is in flight for a long time (every decision of its seat runs out the clock) next to
matches that finish.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scout_ladder.repository import MatchSummary, Repository
from scout_ladder.service import VOID_AT_START, VOID_AT_STOP, VOID_BEFORE_START

CLI = [sys.executable, "-m", "scout_arena.cli"]
RAWBOT = Path(__file__).parent / "bots" / "rawbot.py"
pytestmark = pytest.mark.timeout(900)


class Serve:
    """``scout-arena ladder serve`` as a process, its stdout read by a thread."""

    def __init__(self, database: str, log: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [*CLI, "ladder", "serve", "--database", database, "--port", "0",
             "--table-sizes", "2", "--decision-ms", "15000", "--time-bank-ms", "1000",
             "--admin-token", "adm", "--seed", "5", "-v", *extra],
            stdout=subprocess.PIPE, stderr=log.open("a"), text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.banner: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def listening(self, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise TimeoutError("the ladder did not start listening") from None
            if line is None:
                raise RuntimeError(f"the ladder exited with {self.process.wait()} before "
                                   "listening")
            self.banner.append(line)
            if "listening on" in line:
                return line.split("listening on", 1)[1].strip()

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 180) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def start_bots(address: str, tokens: dict[str, str], logs: Path) -> list[subprocess.Popen[str]]:
    processes = []
    for name, token in tokens.items():
        argv = [sys.executable, str(RAWBOT), "hang"] if name == "hang" else \
            [*CLI, "bot", "run", "random"]
        env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
               "SCOUT_CONCURRENCY": "1" if name == "hang" else "2"}
        processes.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                          stderr=(logs / f"{name}.log").open("a"), text=True))
    return processes


def stop_processes(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def matches(repo: Repository, status: str) -> list[MatchSummary]:
    return repo.list_matches(limit=100_000, status=status)


@pytest.fixture
def ladder(ladder_url: str, tmp_path: Path) -> Iterator[tuple[Repository, dict[str, str]]]:
    repo = Repository(ladder_url)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1]
              for name in ("r1", "r2", "hang")}
    yield repo, tokens
    repo.close()


def playing(repo: Repository) -> bool:
    """Matches have finished, and one has been in flight for a while (the silent bot's)."""
    if len(matches(repo, "finished")) < 2:
        return False
    now = time.time()
    return any(now - m.created_at.timestamp() > 3 for m in matches(repo, "in_flight"))


def test_a_clean_stop_settles_every_row_it_owns(
        ladder: tuple[Repository, dict[str, str]], ladder_url: str, tmp_path: Path) -> None:
    repo, tokens = ladder
    log = tmp_path / "ladder.log"
    serve = Serve(ladder_url, log)
    bots: list[subprocess.Popen[str]] = []
    try:
        bots = start_bots(serve.listening(), tokens, tmp_path)
        wait_for(lambda: playing(repo), 300, "finished matches and one long in flight")
        in_flight = {m.match_id for m in matches(repo, "in_flight")}
        finished = {m.match_id for m in matches(repo, "finished")}
        assert serve.stop(signal.SIGTERM) == 0
    finally:
        serve.stop(signal.SIGKILL)
        stop_processes(bots)
    assert matches(repo, "in_flight") == []
    voided = {m.match_id: m.void_reason for m in matches(repo, "void")}
    # What was in flight either finished before the stop took it or was voided, truly.
    still = in_flight - {m.match_id for m in matches(repo, "finished")}
    assert still and all(voided.get(match_id) == VOID_AT_STOP for match_id in still)
    assert set(voided.values()) <= {VOID_AT_STOP, VOID_BEFORE_START}
    assert finished <= {m.match_id for m in matches(repo, "finished")}
    # The next start finds nothing to void.
    again = Serve(ladder_url, log)
    try:
        again.listening()
        assert not any(line.startswith("voided") for line in again.banner)
    finally:
        assert again.stop(signal.SIGTERM) == 0
    assert "Traceback" not in log.read_text()
    recompute = subprocess.run([*CLI, "ladder", "recompute", "--database", ladder_url],
                               capture_output=True, text=True, timeout=300)
    assert recompute.returncode == 0, recompute.stdout + recompute.stderr


def test_a_second_ladder_refuses_to_start_and_a_killed_ones_lease_does_not_block(
        ladder: tuple[Repository, dict[str, str]], ladder_url: str, tmp_path: Path) -> None:
    repo, tokens = ladder
    log = tmp_path / "ladder.log"
    first = Serve(ladder_url, log)
    bots: list[subprocess.Popen[str]] = []
    third: Serve | None = None
    try:
        bots = start_bots(first.listening(), tokens, tmp_path)
        wait_for(lambda: playing(repo), 300, "finished matches and one long in flight")
        in_flight = {m.match_id for m in matches(repo, "in_flight")}

        second = subprocess.run(
            [*CLI, "ladder", "serve", "--database", ladder_url, "--port", "0"],
            capture_output=True, text=True, timeout=300)
        assert second.returncode == 1, second.stdout + second.stderr
        assert "another ladder is serving" in second.stderr
        assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
        assert "listening" not in second.stdout
        # It touched nothing: the first one's matches are still in flight, none voided.
        assert matches(repo, "void") == []
        assert in_flight & {m.match_id for m in matches(repo, "in_flight")}
        assert first.process.poll() is None
        before = len(matches(repo, "finished"))
        wait_for(lambda: len(matches(repo, "finished")) > before, 300,
                 "the first ladder goes on finishing matches")

        # kill -9, and start again at once: the lease died with the process.
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(60)
        left = {m.match_id for m in matches(repo, "in_flight")}
        third = Serve(ladder_url, log)
        third.listening()
        voided = {m.match_id: m.void_reason for m in matches(repo, "void")}
        assert set(voided) == left and set(voided.values()) <= {VOID_AT_START}
        assert all(match_id in "".join(third.banner) for match_id in left)
    finally:
        first.stop(signal.SIGKILL)
        stop_processes(bots)
        if third is not None:
            assert third.stop(signal.SIGTERM) == 0
    recompute = subprocess.run([*CLI, "ladder", "recompute", "--database", ladder_url],
                               capture_output=True, text=True, timeout=300)
    assert recompute.returncode == 0, recompute.stdout + recompute.stderr


def test_ladders_on_two_postgresql_schemas_do_not_block_each_other(
        _postgres_admin: Any, tmp_path: Path) -> None:
    from sqlalchemy import text

    schemas = [f"ladder_test_{uuid.uuid4().hex[:16]}" for _ in range(2)]
    urls = []
    for schema in schemas:
        with _postgres_admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        urls.append(_postgres_admin.url.update_query_dict(
            {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False))
    ladders = [Serve(url, tmp_path / f"ladder{i}.log") for i, url in enumerate(urls)]
    try:
        for serve in ladders:
            serve.listening()
    finally:
        for serve in ladders:
            assert serve.stop(signal.SIGTERM) == 0
        for schema in schemas:
            with _postgres_admin.connect() as connection:
                connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.mark.parametrize("taken", [False, True], ids=["regained", "taken meanwhile"])
def test_a_ladder_whose_postgresql_lease_connection_dies_takes_it_again_unless_it_was_taken(
        _postgres_admin: Any, tmp_path: Path, taken: bool) -> None:
    """The connection holding the lease is killed (a database restart does the same): the
    ladder takes the lease again and serves on, or, when another ladder took it meanwhile,
    stops cleanly (exit 1) and says why, so that two ladders never serve one database."""
    from scout_ladder.repository import Repository
    from sqlalchemy import text

    schema = f"ladder_test_{uuid.uuid4().hex[:16]}"
    with _postgres_admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = _postgres_admin.url.update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    log = tmp_path / "ladder.log"
    serve = Serve(url, log)
    other = Repository(url)
    lease = None
    try:
        serve.listening()
        with _postgres_admin.connect() as connection:
            ended = connection.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE :holder"),
                {"holder": f"scout-ladder pid {serve.process.pid} %"}).scalars().all()
        assert ended == [True]
        if taken:  # before the ladder's next check (every 5 s) finds its lease gone
            lease = other.acquire_lease()
            assert serve.process.wait(300) == 1
            assert "taken by another ladder" in log.read_text()
            assert "CRITICAL" in log.read_text()
        else:
            deadline = time.monotonic() + 120
            while "holds its database lease again" not in log.read_text():
                assert serve.process.poll() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.2)
            assert serve.stop() == 0
    finally:
        if lease is not None:
            lease.release()
        other.close()
        serve.stop(signal.SIGKILL)
        with _postgres_admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
