"""A bot always knows where it stands on a ladder (issue 28), with real processes on 127.0.0.1.

A ladder (`ladder serve` on SQLite) with two local referee nodes (`--nodes 2`), SDK bot
processes (`scout-arena bot run`) and raw streams. Pinned: a bot killed with SIGKILL and
started again resumes every match it was playing on the nodes (the ladder sends their
assignments again after its Welcome) and forfeits none; nodes killed mid-match end each of
their seats' matches with MatchEnded VOIDED on the bot's stream to the ladder; a bot put on
probation is told so on its stream, and told again when its reconnect lifts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from scout.v1 import arena_pb2
from scout_ladder.repository import Repository
from support.rawbot import RawBot
from test_ladder_processes import wait_for

CLI = [sys.executable, "-m", "scout_arena.cli"]
ROOT = Path(__file__).resolve().parent.parent
SLOW_BOT = Path(__file__).parent / "bots" / "slow_bot.py"
pytestmark = pytest.mark.timeout(600)


@dataclass
class LadderRun:
    """A `ladder serve` process, its bots' processes and its database."""

    tmp: Path
    repo: Repository
    tokens: dict[str, str]
    process: subprocess.Popen[str] | None = None
    address: str = ""
    bots: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    def start(self, *extra: str) -> None:
        log = self.tmp / "ladder.log"
        self.process = subprocess.Popen(
            [*CLI, "ladder", "serve", "--database", f"sqlite:///{self.tmp / 'ladder.db'}",
             "--port", "0", "--table-sizes", "2", "--seed", "5", "--admin-token", "adm",
             "--node-records", str(self.tmp / "nodes"), "-v", *extra],
            stdout=subprocess.PIPE, stderr=log.open("a"), text=True)
        assert self.process.stdout is not None
        nodes = "--nodes" not in extra
        while not (self.address and nodes):
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the ladder did not start:\n{log.read_text()[-3000:]}")
            found = re.search(r"listening on (\S+)", line)
            self.address = found.group(1) if found else self.address
            nodes = nodes or "local referee nodes on" in line

    def start_bot(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.tmp / f"bot-{name}.log").open("a")
        self.bots[name] = subprocess.Popen(
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "SCOUT_ADDRESS": self.address, "SCOUT_TOKEN": self.tokens[name],
                 "SCOUT_CONCURRENCY": "2", **(env or {})})

    def bot_log(self, name: str) -> str:
        return (self.tmp / f"bot-{name}.log").read_text()

    def in_flight(self) -> list[tuple[str, set[str]]]:
        return [(m.match_id, {s.bot for s in m.seats})
                for m in self.repo.list_matches(limit=1000, status="in_flight")]

    def node_pids(self) -> list[int]:
        assert self.process is not None
        pids: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            pids += [int(p) for p in (task / "children").read_text().split()]
        return [p for p in pids
                if b"referee\0serve" in Path(f"/proc/{p}/cmdline").read_bytes()]

    def close(self) -> None:
        for bot in self.bots.values():
            if bot.poll() is None:
                bot.terminate()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for bot in self.bots.values():
            try:
                bot.wait(30)
            except subprocess.TimeoutExpired:
                bot.kill()
                bot.wait()
        self.repo.close()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[LadderRun]:
    repo = Repository(f"sqlite:///{tmp_path / 'ladder.db'}")
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1]
              for name in ("slow", "r1", "r2", "hang")}
    ladder = LadderRun(tmp_path, repo, tokens)
    try:
        yield ladder
    finally:
        ladder.close()


def slow_bot(run: LadderRun) -> None:
    run.start_bot("slow", [*CLI, "bot", "run", f"{SLOW_BOT}:SlowBot"],
                  {"SLOW_BOT_DELAY_S": "0.1"})


def forfeits_of(run: LadderRun, match_id: str) -> list[str]:
    record = json.loads(run.repo.get_record(match_id) or "{}")
    names = {p["seat"]: p["name"] for p in record["players"]}
    return [names[seat] for seat in record["forfeits"]]


def kill_and_restart_in_two_matches(run: LadderRun, start: Callable[[], None],
                                    started_marker: str) -> tuple[list[str], str]:
    """Start bot "slow" (``start``) beside two random bots, kill -9 it while it plays two
    matches on the nodes, start it again, and wait for those matches to settle; they must
    finish with no forfeit. Returns those still under way at the kill and the restarted
    bot's log."""
    start()
    for name in ("r1", "r2"):
        run.start_bot(name, [*CLI, "bot", "run", "random"])
    playing: list[str] = []

    def plays_two() -> bool:
        playing[:] = [m for m, bots in run.in_flight() if "slow" in bots]
        return len(playing) == 2 and started_marker in run.bot_log("slow")

    wait_for(plays_two, 120, "the slow bot in two matches on the nodes")
    time.sleep(1.0)  # both under way on their nodes
    playing[:] = [m for m, bots in run.in_flight() if "slow" in bots]
    assert playing
    victim = run.bots["slow"]
    victim.kill()
    victim.wait()
    before_kill = run.bot_log("slow")
    before = len(before_kill)
    # A match can end between the snapshot and the kill: the killed bot saw it end.
    ended = {m for m in playing for line in before_kill.splitlines()
             if m in line and "ended" in line}
    playing[:] = [m for m in playing if m not in ended]
    assert playing, before_kill
    start()

    def settled() -> bool:
        return not {m for m, _ in run.in_flight()} & set(playing)

    wait_for(settled, 180, "the matches of the killed bot settled")
    after = run.bot_log("slow")[before:]
    for match_id in playing:
        summary = run.repo.get_match(match_id)
        assert summary is not None and summary.status == "finished", (match_id, summary)
        assert forfeits_of(run, match_id) == [], f"{match_id}: a seat forfeited\n{after}"
    return playing, after


def test_a_bot_killed_and_restarted_resumes_every_match_it_plays_on_the_nodes(
        run: LadderRun) -> None:
    # 20 s of bank: the restart (a few seconds) times out no request of the slow bot's.
    run.start("--nodes", "2", "--decision-ms", "2000", "--time-bank-ms", "20000")
    playing, after = kill_and_restart_in_two_matches(run, lambda: slow_bot(run), "match")
    for match_id in playing:
        assert f"match {match_id} is played on node" in after, after
    assert after.count("resumed (seat") >= 1, after


def test_nodes_killed_mid_match_end_each_seat_with_a_voided_match_on_the_ladder_stream(
        run: LadderRun) -> None:
    run.start("--nodes", "2", "--decision-ms", "2000", "--time-bank-ms", "20000")
    slow_bot(run)
    for name in ("r1", "r2"):
        run.start_bot(name, [*CLI, "bot", "run", "random"])
    wait_for(lambda: len(run.in_flight()) >= 2, 120, "two matches in flight")
    time.sleep(1.0)
    pids = run.node_pids()
    assert len(pids) == 2
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    playing = dict(run.in_flight())

    def voided() -> dict[str, str]:
        return {m.match_id: m.void_reason or "" for m in
                run.repo.list_matches(limit=1000, status="void") if m.match_id in playing}

    wait_for(lambda: bool(voided()) and not {m for m, _ in run.in_flight()} & set(playing),
             60, "the matches of the killed nodes voided")
    lost = {m: why for m, why in voided().items() if "was lost" in why}
    assert lost, voided()

    def told() -> bool:
        return all(f"match {m} voided" in run.bot_log(bot)
                   for m in lost for bot in playing[m])

    wait_for(told, 30, "every seat of a voided match told so")
    for match_id in lost:
        for bot in playing[match_id]:
            line = next(x for x in run.bot_log(bot).splitlines()
                        if f"match {match_id} voided" in x)
            assert "its referee node" in line and "was lost" in line, line


def test_a_bot_put_on_probation_is_told_on_its_stream_and_told_when_it_is_lifted(
        run: LadderRun) -> None:
    run.start("--decision-ms", "200", "--time-bank-ms", "200", "--reconnect-grace", "3")
    for name in ("r1", "r2"):
        run.start_bot(name, [*CLI, "bot", "run", "random"])

    async def main() -> tuple[arena_pb2.Probation, arena_pb2.Probation, list[str]]:
        # A bot that never answers: every match of it ends in timeouts and a forfeit.
        hang, _ = await RawBot.connect(run.address, run.tokens["hang"], max_matches=4)
        try:
            put: arena_pb2.Probation = await hang.expect("probation", timeout=240)
        finally:
            await hang.close()
        again, welcome = await RawBot.connect(run.address, run.tokens["hang"])
        try:
            lifted: arena_pb2.Probation = await again.expect("probation", timeout=20)
            kinds: list[str] = [m.WhichOneof("body") or "" for m in again.messages]
        finally:
            await again.close()
        assert welcome.bot_name == "hang"
        return put, lifted, kinds

    put, lifted, kinds = asyncio.run(main())
    assert put.active and put.lifted_by_reconnect, put
    assert "timeouts or forfeits" in put.reason and "reconnects" in put.reason, put
    assert not lifted.active and "reconnected" in lifted.reason, lifted
    assert "timeouts or forfeits" in lifted.reason, lifted
    assert kinds.index("welcome") < kinds.index("probation"), kinds
