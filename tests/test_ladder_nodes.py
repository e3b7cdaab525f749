"""A ladder over referee nodes, as real processes on 127.0.0.1, on PostgreSQL (issue 13).

One ``ladder serve --node-token`` and three ``referee serve --join`` nodes; bots connect to the
ladder only and follow its assignments to the nodes (PROTOCOL.md §3.8). The faults: a node
killed with SIGKILL, a node stopped with SIGSTOP past its heartbeat timeout (and continued),
and the ladder itself killed and restarted. After each, no finished match is lost, every void
says why, and the stored ratings are exactly a recompute of the history.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from scout.v1 import matches_pb2, matches_pb2_grpc
from scout_arena.record import record_from_json, replay
from scout_ladder.recompute import check
from scout_ladder.repository import Repository
from support.kits import KITS, require
from support.ports import free_port
from support.referee_e2e import make_self_signed
from test_ladder_processes import wait_for
from test_starter_kits import built_kits  # noqa: F401

CLI = [sys.executable, "-m", "scout_arena.cli"]
ROOT = Path(__file__).resolve().parent.parent
SLOW_BOT = Path(__file__).parent / "bots" / "slow_bot.py"
NODE_TOKEN = "node-secret"
HEARTBEAT_TIMEOUT_S = 3.0
pytestmark = pytest.mark.timeout(900)


class Process:
    """A child whose stdout lines are read by a thread."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log.open("a"),
                                        text=True, env={**os.environ, **(env or {})})
        self.log = log
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def expect(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise TimeoutError(f"no {text!r} from {self.log.name}") from None
            if line is None:
                raise RuntimeError(f"{self.log.name} exited with {self.process.wait()}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            if text in line:
                return line

    def signal(self, sig: signal.Signals) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self, timeout: float = 60) -> int:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


@dataclass
class Cluster:
    url: str
    tmp: Path
    repo: Repository
    tokens: dict[str, str]
    ladder_port: int = field(default_factory=free_port)
    ladder: Process | None = None
    nodes: dict[str, Process] = field(default_factory=dict)
    node_ports: dict[str, int] = field(default_factory=dict)
    bots: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ladder_port}"

    def start_ladder(self) -> None:
        self.ladder = Process([
            *CLI, "ladder", "serve", "--database", self.url, "--port", str(self.ladder_port),
            "--node-token", NODE_TOKEN, "--table-sizes", "2,3", "--seed", "7",
            "--admin-token", "adm", "--decision-ms", "2000", "--time-bank-ms", "5000",
            "--node-heartbeat-timeout", str(HEARTBEAT_TIMEOUT_S), "--join-timeout", "8", "-v"],
            self.tmp / "ladder.log")
        self.ladder.expect("listening on")

    def start_node(self, name: str) -> None:
        port = self.node_ports.setdefault(name, free_port())
        node = Process([
            *CLI, "referee", "serve", "--port", str(port), "--join", self.address,
            "--node-name", name, "--records", str(self.tmp / f"records-{name}"),
            "--capacity", "20", "-v"], self.tmp / f"{name}.log",
            env={"SCOUT_NODE_TOKEN": NODE_TOKEN, "SCOUT_REFEREE_ADMIN_TOKEN": "adm"})
        node.expect("node of the ladder")
        self.nodes[name] = node

    def start_bot(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.tmp / f"bot-{name}.log").open("a")
        self.bots.append(subprocess.Popen(
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "SCOUT_ADDRESS": self.address, "SCOUT_TOKEN": self.tokens[name],
                 "SCOUT_BOT_NAME": name, "SCOUT_CONCURRENCY": "2", **(env or {})}))

    def start_python_bots(self, names: list[str]) -> None:
        for i, name in enumerate(names):
            if i % 2:
                self.start_bot(name, [*CLI, "bot", "run", f"{SLOW_BOT}:SlowBot"],
                               {"SLOW_BOT_DELAY_S": "0.03"})
            else:
                self.start_bot(name, [*CLI, "bot", "run", "random"])

    def running_on(self, name: str) -> int:
        """Matches running on a node now, from its Matches service."""
        return len(self.running_matches(name))

    def running_matches(self, name: str) -> list[matches_pb2.MatchInfo]:
        with grpc.insecure_channel(f"127.0.0.1:{self.node_ports[name]}") as channel:
            listed = matches_pb2_grpc.MatchesStub(channel).ListMatches(
                matches_pb2.ListMatchesRequest(status=matches_pb2.MATCH_STATUS_RUNNING),
                metadata=(("authorization", "Bearer adm"),), timeout=10)
        return list(listed.matches)

    def finished(self) -> dict[str, dict[str, Any]]:
        """Finished matches: id -> record JSON."""
        out = {}
        for summary in self.repo.list_matches(limit=100_000, status="finished"):
            record = self.repo.get_record(summary.match_id)
            assert record is not None
            out[summary.match_id] = json.loads(record)
        return out

    def voids(self) -> dict[str, str]:
        return {m.match_id: m.void_reason or "" for m in
                self.repo.list_matches(limit=100_000, status="void")}

    def in_flight(self) -> list[Any]:
        return self.repo.list_matches(limit=100_000, status="in_flight")

    def close(self) -> None:
        for bot in self.bots:
            if bot.poll() is None:
                bot.terminate()
        if self.ladder is not None:
            self.ladder.stop()
        for node in self.nodes.values():
            node.stop()
        for bot in self.bots:
            try:
                bot.wait(30)
            except subprocess.TimeoutExpired:
                bot.kill()


def node_of(record: dict[str, Any]) -> str:
    return str(record["meta"].get("node", ""))


def assert_recompute_exact(repo: Repository) -> None:
    report = check(repo.rating_snapshot())
    assert report.differences == (), report.differences
    assert report.matches > 0


def assert_every_record_replays(records: dict[str, dict[str, Any]]) -> None:
    for record in records.values():
        replay(record_from_json(record))


BOTS = ["p1", "p2", "p3", "p4", "p5", "p6"]


@pytest.fixture
def cluster(postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    repo = Repository(postgres_url)
    repo.migrate()
    names = [*BOTS, *KITS]
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in names}
    c = Cluster(postgres_url, tmp_path, repo, tokens)
    try:
        c.start_ladder()
        for name in ("n1", "n2", "n3"):
            c.start_node(name)
        yield c
    finally:
        c.close()
        repo.close()


def test_a_ladder_with_three_nodes_spreads_matches_over_all_and_rates_them_as_one_pool(
        cluster: Cluster, built_kits: dict[str, str]) -> None:  # noqa: F811
    for kit in ("go", "typescript"):
        command = list(require(built_kits, kit).command)
        cluster.start_bot(kit, command)
    cluster.start_python_bots(BOTS[:4])
    kit_players: set[str] = set()

    def enough() -> bool:
        records = cluster.finished()
        kit_players.update(p["name"] for r in records.values() for p in r["players"]
                           if p["name"] in ("go", "typescript"))
        nodes = {node_of(r) for r in records.values()}
        return len(records) >= 40 and nodes >= {"n1", "n2", "n3"} and \
            kit_players >= {"go", "typescript"}

    wait_for(enough, 240, "40 finished matches on every node, with both kits")
    records = cluster.finished()
    assert {node_of(r) for r in records.values()} == {"n1", "n2", "n3"}
    assert_every_record_replays(records)
    for record in records.values():
        assert record["forfeits"] == [], (record["match_id"], record["notes"])
    assert_recompute_exact(cluster.repo)


def test_a_node_killed_mid_run_loses_only_its_running_matches_and_its_bots_play_on(
        cluster: Cluster) -> None:
    cluster.start_python_bots(BOTS)
    wait_for(lambda: len(cluster.finished()) >= 15, 180, "15 finished matches")
    # The victim: a node with a match running now (placement may leave one idle a while).
    busy: list[str] = []

    def found_busy() -> bool:
        busy[:] = [n for n in cluster.nodes if cluster.running_on(n)]
        return bool(busy)

    wait_for(found_busy, 60, "a node with a running match")
    name = busy[0]
    victim = cluster.nodes[name]
    killed_at = time.time()
    victim.process.kill()
    victim.process.wait()
    finished_before = set(cluster.finished())
    # Its matches are voided, saying so, and every bot is seated again, elsewhere, in 15 s.
    wait_for(lambda: any(name in r and "was lost" in r for r in cluster.voids().values()),
             15, "a void naming the lost node")
    lost = [r for r in cluster.voids().values() if name in r and "was lost" in r]
    assert not any("the ladder is stopping" in r for r in lost), lost  # it runs on

    def everyone_seated_again() -> bool:
        seated = {seat.bot for m in cluster.repo.list_matches(limit=100_000)
                  if m.created_at.timestamp() > killed_at for seat in m.seats}
        return seated >= set(BOTS)

    wait_for(everyone_seated_again, 15, "every bot seated in a new match within 15 s")
    records = cluster.finished()
    assert finished_before <= set(records), "a finished match was lost"
    # A report the node sent just before it died may be stored after the snapshot above; no
    # match on the dead node may have ended after its death.
    late = {m: records[m]["meta"].get("ended_at") for m in set(records) - finished_before
            if node_of(records[m]) == name}
    assert all(ended is not None and ended <= killed_at for ended in late.values()), \
        f"a match was played on the dead node: {late} (killed at {killed_at})"
    # The node comes back on its port and registers again; matches go to it again.
    cluster.start_node(name)
    count = len(records)
    wait_for(lambda: any(node_of(r) == name for m, r in cluster.finished().items()
                         if m not in records), 90, "a match on the restarted node")
    assert len(cluster.finished()) > count
    assert_every_record_replays(cluster.finished())
    assert_recompute_exact(cluster.repo)


def test_a_stopped_node_is_dropped_by_its_heartbeat_and_its_late_results_are_never_rated(
        cluster: Cluster) -> None:
    cluster.start_python_bots(BOTS)
    wait_for(lambda: len(cluster.finished()) >= 10, 180, "10 finished matches")
    victim = cluster.nodes["n3"]
    # Stopped while a match is running there, short of its last round: it cannot end in the
    # moment between the listing and the stop, so it is among the voided.
    begun: list[str] = []

    def one_running_before_its_last_round() -> bool:
        begun[:] = [m.match_id for m in cluster.running_matches("n3")
                    if m.round_index < len(m.bots) - 1]
        return bool(begun)

    wait_for(one_running_before_its_last_round, 60, "a match running on n3")
    victim.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: any("n3" in r and "no heartbeat" in r for r in cluster.voids().values()),
                 HEARTBEAT_TIMEOUT_S + 12, "a void of the stopped node, by its heartbeat")
        voided = {m for m, r in cluster.voids().items() if "n3" in r}
        finished_before = set(cluster.finished())
        time.sleep(2.0)
    finally:
        victim.signal(signal.SIGCONT)
    # Back, it attaches again; what it was playing is cancelled or reported late, never rated.
    wait_for(lambda: "attached from" in "".join(
        line for line in (cluster.tmp / "ladder.log").read_text().splitlines()[-2000:]
        if "node n3" in line and "attached" in line), 30, "the node attaching again")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and cluster.in_flight():
        time.sleep(0.5)
    records = cluster.finished()
    assert finished_before <= set(records)
    assert not voided & set(records), "a voided match was rated after all"
    assert voided <= set(cluster.voids())
    snapshot = cluster.repo.rating_snapshot()
    rated = {m.match_id for m in snapshot.matches}
    assert not voided & rated
    assert_recompute_exact(cluster.repo)
    log = (cluster.tmp / "ladder.log").read_text()
    assert log.count("node n3 attached from") >= 2, "the stopped node never attached again"
    # The voided matches that had begun there are in the node's own records (finished late,
    # or aborted by the ladder's cancel); one still waiting for its bots leaves none, and the
    # node says it dropped it; one whose assignment was still on the wire when the ladder gave
    # up on the link never reached the node at all.
    assert set(begun) <= voided

    def on_the_node(match_id: str) -> bool:
        return (cluster.tmp / "records-n3" / f"{match_id}.json").exists()

    def accounted_for(match_id: str) -> bool:
        node_log = (cluster.tmp / "n3.log").read_text()
        return on_the_node(match_id) \
            or f"assigned match {match_id} cancelled before it began" in node_log \
            or f"holding ladder match {match_id} " not in node_log

    wait_for(lambda: all(on_the_node(m) for m in begun), 30, "the begun match's record on n3")
    wait_for(lambda: all(accounted_for(m) for m in voided), 30,
             "every voided match held on n3 recorded or cancelled there")


def test_the_ladder_killed_and_restarted_loses_no_finished_match_and_nodes_come_back(
        cluster: Cluster) -> None:
    cluster.start_python_bots(BOTS)
    wait_for(lambda: len(cluster.finished()) >= 15, 180, "15 finished matches")
    assert cluster.ladder is not None
    cluster.ladder.process.kill()
    cluster.ladder.process.wait()
    finished_before = set(cluster.finished())
    in_flight_at_kill = {m.match_id for m in cluster.in_flight()}
    time.sleep(3.0)  # the nodes play on meanwhile
    cluster.start_ladder()
    # Nodes and bots find the ladder again by themselves, and matches are played again.
    wait_for(lambda: len(cluster.finished()) >= len(finished_before) + 10, 120,
             "10 more finished matches after the restart")
    wait_for(lambda: not ({m.match_id for m in cluster.in_flight()} & in_flight_at_kill), 60,
             "the matches in flight at the kill settled")
    records = cluster.finished()
    assert finished_before <= set(records), "a finished match was lost"
    voids = cluster.voids()
    for match_id in in_flight_at_kill:
        assert match_id in records or match_id in voids, match_id
    assert len({node_of(r) for m, r in records.items() if m not in finished_before}) >= 2, \
        "the nodes did not all come back"
    assert_every_record_replays(records)
    assert_recompute_exact(cluster.repo)


def test_nodes_and_bots_speak_tls_to_a_tls_ladder_and_a_wrong_node_token_is_refused(
        postgres_url: str, tmp_path: Path) -> None:
    cert, key = make_self_signed(tmp_path)
    repo = Repository(postgres_url)
    repo.migrate()
    tokens = {name: repo.register_bot(name, f"owner-{name}")[1] for name in ("t1", "t2")}
    c = Cluster(postgres_url, tmp_path, repo, tokens)
    tls = ["--tls-cert", str(cert), "--tls-key", str(key)]
    try:
        c.ladder = Process([
            *CLI, "ladder", "serve", "--database", postgres_url, "--port", str(c.ladder_port),
            "--node-token", NODE_TOKEN, "--table-sizes", "2", "--admin-token", "adm", *tls,
            "-v"], tmp_path / "ladder.log")
        c.ladder.expect("listening on")
        def join(name: str, token: str, *extra: str) -> Process:
            node = c.nodes[name] = Process([
                *CLI, "referee", "serve", "--port", "0", "--join", c.address, "--ladder-ca",
                str(cert), "--node-name", name, "--records", str(tmp_path / f"records-{name}"),
                "-v", *extra], tmp_path / f"{name}.log",
                env={"SCOUT_NODE_TOKEN": token, "SCOUT_REFEREE_ADMIN_TOKEN": "adm"})
            return node

        join("intruder", "not-the-token")
        join("secure", NODE_TOKEN, *tls).expect("node of the ladder")
        for name in tokens:
            c.start_bot(name, [*CLI, "bot", "run", "random", "--ca-cert", str(cert)])
        wait_for(lambda: len(c.finished()) >= 3, 120, "3 matches over TLS")
        records = c.finished()
        assert {node_of(r) for r in records.values()} == {"secure"}
        assert_every_record_replays(records)
        wait_for(lambda: "check --node-token" in (tmp_path / "intruder.log").read_text(), 30,
                 "the intruder told it is refused")
        assert "node intruder" not in (tmp_path / "ladder.log").read_text()
    finally:
        c.close()
        repo.close()


def test_placement_takes_the_least_loaded_node_and_the_bots_last_node_only_on_a_tie() -> None:
    from scout_ladder.nodes import NodeRegistry, NodeSession

    registry = NodeRegistry()
    for address in ("a:1", "b:1"):
        registry.nodes[address] = NodeSession(
            node_id=address, address=address, name=address, capacity=100, version="t",
            tls=False, attached_at=0.0)
    a, b = registry.nodes["a:1"], registry.nodes["b:1"]
    registry.last_node.update({"x": "a:1", "y": "a:1"})
    assert registry.place(["x", "y"]) is a  # equal load: the bots' node
    a.matches.add("m1")
    assert registry.place(["x", "y"]) is b  # one match more, far below capacity: spread
    b.matches.add("m2")
    assert registry.place(["x", "y"]) is a  # equal again: the bots' node
    b.capacity = 200
    assert registry.place(["x", "y"]) is b  # load is matches / capacity
    a.capacity = 1
    b.capacity = 2
    b.matches.add("m3")
    assert registry.place(["x", "y"]) is None  # full nodes take nothing
    b.capacity = 100
    b.alive = False
    assert registry.place(["x", "y"]) is None
    assert registry.free_capacity() == 0
