"""Tournaments on several nodes: ``--nodes`` (local worker processes) and ``--ray`` (a real Ray
cluster of two nodes on 127.0.0.N, started and stopped here). Same seed, deterministic bots:
the records and the standings equal a local run's, whatever happens to a node.

The field: two bundled greedy bots, a greedy bot started as a script by a relative path (so it
needs the right working directory on every node), and a program that does not exist (it fails
to start on every node, and the summary says on which).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scout_arena.record import read_record_json, replay

CLI = [sys.executable, "-m", "scout_arena.cli", "tournament", "--no-progress"]
BOT_SCRIPT = """import sys
from scout_arena.cli import main
sys.exit(main(["bot", "run", "greedy"]))
"""
FIELD = ["--bot", "a=greedy", "--bot", "b=greedy", "--bot", f"c={sys.executable} greedy_bot.py",
         "--bot", "ghost=/nonexistent/bot-program", "--players", "2", "--games", "1",
         "--concurrency", "2", "--seed", "17", "--decision-ms", "5000", "--time-bank-ms", "60000",
         "--keep-going"]  # the ghost cannot start: the local run plays on, as nodes do
MATCHES = 12
RUN_TIMEOUT = 600


def _run(args: list[str], out: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *FIELD, *args, "--out", str(out)], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, cwd=cwd)


def _records(out: Path) -> dict[str, dict[str, Any]]:
    """Every record by tournament key, without what differs from run to run (ids, times,
    the time left on the clocks and other per-seat durations)."""
    by_key: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "records").glob("*.json")):
        record = read_record_json(path)
        replay(record)
        record.pop("match_id")
        meta = record["meta"]
        for key in ("match_id", "created_at", "ended_at"):
            meta.pop(key, None)
        for seat in meta.get("seats", []):
            for name in [k for k in seat if k.endswith("_ms")]:  # clocks: time_bank_ms, ...
                del seat[name]
        key = meta["tournament_key"]
        assert key not in by_key, f"{key} recorded twice"
        by_key[key] = record
    return by_key


def _results(out: Path) -> tuple[dict[str, dict[str, Any]], list[Any], Any]:
    summary = json.loads((out / "summary.json").read_text())
    standings = [{k: v for k, v in row.items() if k not in ("status", "notes")}
                 for row in summary["standings"]]
    return _records(out), standings, summary["head_to_head"]


def _summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return data


def _bots_in(directory: Path) -> list[int]:
    """Processes whose working directory is ``directory``: the bots of our runs."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == directory:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _assert_no_bot_left(directory: Path) -> None:
    deadline = time.monotonic() + 30
    while _bots_in(directory) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _bots_in(directory), "bot processes outlived their node"


@pytest.fixture(scope="module")
def bot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bots")
    (directory / "greedy_bot.py").write_text(BOT_SCRIPT)
    return directory


@pytest.fixture(scope="module")
def local_run(bot_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tournament played the ordinary way, on one node."""
    out = tmp_path_factory.mktemp("local") / "t"
    result = _run([], out, bot_dir)
    assert result.returncode == 0, result.stderr
    assert _summary(out)["matches_finished"] == MATCHES
    return out


def _assert_same_as_local(out: Path, local: Path) -> None:
    records, standings, head_to_head = _results(out)
    local_records, local_standings, local_h2h = _results(local)
    assert len(records) == MATCHES
    assert records == local_records
    assert standings == local_standings
    assert head_to_head == local_h2h


def _ghost_notes(out: Path) -> list[str]:
    rows = {row["bot"]: row for row in _summary(out)["standings"]}
    assert rows["ghost"]["status"] == "failed to start"
    assert rows["a"]["status"] == rows["c"]["status"] == "connected"
    notes: list[str] = rows["ghost"]["notes"]
    return [n for n in notes if "could not start" in n]


def _children(pid: int, marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and marker in cmdline:
                found.append(int(entry.name))
    return found


# ----- --nodes ------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_nodes_run_equals_the_local_run_even_when_a_node_is_killed(
        bot_dir: Path, local_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "t"
    process = subprocess.Popen([*CLI, *FIELD, "--nodes", "2", "--chunk-size", "2",
                                "--out", str(out)], cwd=bot_dir, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: len(_children(process.pid, "scout_arena.tournament.worker")) == 2,
                  120, "two workers")
        _wait_for(lambda: any((out / "records").glob("*.json")), 300, "a first record")
        victim = _children(process.pid, "scout_arena.tournament.worker")[0]
        os.kill(victim, signal.SIGKILL)
        _, stderr = process.communicate(timeout=RUN_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert _summary(out)["matches_finished"] == MATCHES
    _assert_same_as_local(out, local_run)
    faults = _summary(out)["faults"]  # the killed node is in the results, not only on stderr
    assert faults and {f["kind"] for f in faults} <= {"node_died", "node_exited"}, faults
    assert {f["node"] for f in faults} < {"node-1", "node-2"}, faults
    assert _summary(local_run)["faults"] == []
    notes = _ghost_notes(out)
    assert any("on node node-2:" in n for n in notes) or any("on node node-1:" in n
                                                               for n in notes)
    assert (out / "logs" / "node-1" / "a.stderr.log").exists()
    assert (out / "logs" / "node-2" / "node.stderr.log").exists()
    _assert_no_bot_left(bot_dir)


def _with_environment(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_workers_started_ahead_end_with_a_command_refused_before_playing(
        tmp_path: Path) -> None:
    """``--nodes`` starts its workers before anything else (their start-up then runs beside
    the driver's); a command refused after that leaves none of them running."""
    name, value = "SCOUT_TEST_AHEAD", str(os.getpid())
    out = tmp_path / "a-file"
    out.write_text("not a tournament")
    done = subprocess.run([*CLI, *FIELD, "--nodes", "2", "--out", str(out)], text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, name: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "is a file, not a folder" in done.stderr, \
        done.stderr
    assert not _with_environment(f"{name}={value}")


# ----- Ray ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A head and a worker node, one CPU each, on 127.0.0.N; killed at the end."""
    pytest.importorskip("ray")
    from scout_arena.tournament.raycluster import LocalRayCluster

    cluster = LocalRayCluster(num_cpus=1)
    try:
        cluster.start()
        cluster.add_worker()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(ray_cluster: Any) -> Any:
    """The module's cluster, with a live worker node (a test before may have killed one)."""
    if not any(node.alive() for node in ray_cluster.nodes if not node.head):
        ray_cluster.add_worker()
    return ray_cluster


def _ray_node_names(out: Path) -> set[str]:
    return {n.split(":")[0].removeprefix("on node ") for n in _ghost_notes(out)}


@pytest.mark.timeout(900)
def test_ray_run_equals_the_local_run_and_names_the_nodes_a_bot_failed_on(
        cluster: Any, bot_dir: Path, local_run: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "t"
    # The driver runs in another folder: the relative bot script reaches the nodes only
    # because --ray-working-dir ships its folder.
    result = _run(["--ray", cluster.address, "--chunk-size", "6", "--ray-working-dir",
                   str(bot_dir)], out, elsewhere)
    assert result.returncode == 0, result.stderr
    _assert_same_as_local(out, local_run)
    names = _ray_node_names(out)
    assert names and all(name.startswith("127.0.0.") for name in names), names


@pytest.mark.timeout(900)
def test_an_interrupted_ray_run_resumes_and_plays_only_the_unfinished_matches(
        cluster: Any, bot_dir: Path, local_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "t"
    process = subprocess.Popen([*CLI, *FIELD, "--ray", cluster.address, "--chunk-size", "3",
                                "--out", str(out)], cwd=bot_dir, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: any((out / "records").glob("*.json")), 400, "a first record")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    summary = _summary(out)
    assert summary["interrupted"] is True
    before = {p.name: p.read_bytes() for p in (out / "records").glob("*.json")}
    assert 0 < summary["matches_finished"] == len(before) < MATCHES

    resumed = subprocess.run([*CLI, "--resume", str(out), "--ray", cluster.address,
                              "--chunk-size", "3"], capture_output=True, text=True,
                             timeout=RUN_TIMEOUT, cwd=bot_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert _summary(out)["interrupted"] is False
    for name, content in before.items():
        assert (out / "records" / name).read_bytes() == content
    _assert_same_as_local(out, local_run)
    _assert_no_bot_left(bot_dir)


@pytest.mark.timeout(900)
def test_a_ray_worker_node_killed_mid_run_loses_nothing_and_records_nothing_twice(
        cluster: Any, bot_dir: Path, local_run: Path, tmp_path: Path) -> None:
    worker = next(node for node in cluster.nodes if not node.head and node.alive())
    out = tmp_path / "t"
    process = subprocess.Popen([*CLI, *FIELD, "--ray", cluster.address, "--chunk-size", "3",
                                "--out", str(out)], cwd=bot_dir, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: any(cmd.startswith("ray::ray_chunk")
                              for _, cmd in worker.processes()), 400,
                  "a chunk running on the worker node")
        time.sleep(1.0)  # let it start its bots and matches
        worker.kill()
        _, stderr = process.communicate(timeout=RUN_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert _summary(out)["matches_finished"] == MATCHES
    _assert_same_as_local(out, local_run)
    # A chunk the kill caught is retried; the attempts actor sits on the head node, so it
    # outlives the worker node and says what became of the first attempt (unless the kill
    # came before that attempt could tell it).
    retried = [f for f in _summary(out)["faults"] if f["kind"] == "ray_chunk_retried"]
    assert all("its node died" in f["detail"] or "before they could say" in f["detail"]
               for f in retried), (retried, stderr)
    _assert_no_bot_left(bot_dir)
    shutil.rmtree(out)


def _chunks_playing(cluster: Any) -> list[int]:
    """Ray worker processes playing a chunk whose bots have started, on any live node."""
    found = []
    for node in cluster.nodes:
        if node.alive():
            for pid, cmd in node.processes():
                if cmd.startswith("ray::ray_chunk") and _children(pid, "bot"):
                    found.append(pid)
    return found


@pytest.mark.timeout(900)
def test_a_ray_chunk_whose_worker_died_and_was_retried_is_listed_in_the_faults(
        cluster: Any, bot_dir: Path, local_run: Path, tmp_path: Path) -> None:
    """Issue 30: a Ray task that Ray ran again after its worker died, and that then
    succeeded, left no trace in summary.json. Its chunk is now a ray_chunk_retried fault with
    the attempt it finished on and what became of the attempt before."""
    out = tmp_path / "t"
    process = subprocess.Popen([*CLI, *FIELD, "--ray", cluster.address, "--chunk-size", "3",
                                "--out", str(out)], cwd=bot_dir, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: bool(_chunks_playing(cluster)), 400, "a chunk playing")
        for pid in _chunks_playing(cluster)[:1]:  # its bots are still connecting
            os.kill(pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=RUN_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    _assert_same_as_local(out, local_run)
    faults = _summary(out)["faults"]
    retried = [f for f in faults if f["kind"] == "ray_chunk_retried"]
    assert len(retried) == 1 and len(faults) == 1, (faults, stderr)
    assert retried[0]["attempts"] == 2 and retried[0]["matches"] == 3, retried
    assert "attempt 1 on 127.0.0." in retried[0]["detail"], (retried, stderr)
    assert "its worker process" in retried[0]["detail"], retried
    _assert_no_bot_left(bot_dir)


def _sprt(args: list[str], out: Path) -> dict[str, Any]:
    """`scout-arena sprt` greedy against random on the real distributed path; its summary."""
    done = subprocess.run([sys.executable, "-m", "scout_arena.cli", "sprt", "--new", "greedy",
                           "--base", "random", "--max-games", "8", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, done.stderr + done.stdout
    summary: dict[str, Any] = json.loads((out / "sprt.json").read_text())
    assert summary["path"] == "distributed"
    assert 0 < summary["games_used"] <= 8 and summary["decision"] in ("H1", None)
    assert summary["estimate"] > 0, "greedy scores above random on the same deals"
    return summary


@pytest.mark.timeout(900)
def test_sprt_plays_on_local_nodes(tmp_path: Path) -> None:
    _sprt(["--nodes", "2"], tmp_path / "s")


@pytest.mark.timeout(900)
def test_sprt_plays_on_the_ray_cluster(cluster: Any, tmp_path: Path) -> None:
    _sprt(["--ray", cluster.address], tmp_path / "s")


def test_a_node_is_given_its_next_chunk_while_the_last_matches_of_one_still_play(
        tmp_path: Path) -> None:
    """Issue 30: the seats of a ``--nodes`` worker idled at every chunk's end until the driver
    heard "done" and sent the next. The worker now asks for more as the chunk's last matches
    start, and plays the next chunk's beside them."""
    from scout_arena.tournament import BotSpec, TournamentConfig
    from scout_arena.tournament.config import ScheduledMatch
    from scout_arena.tournament.worker import items_to_json

    # Bots that think for a while: a match lasts seconds, so the overlap does not hang on a few
    # milliseconds of a busy machine.
    slow = "search --iterations 1500"
    config = TournamentConfig((BotSpec("a", slow), BotSpec("b", slow),
                               BotSpec("c", slow)), players=2, games=1, concurrency=2,
                              seed=3, decision_ms=5000, time_bank_ms=60_000)
    pairs = [("a", "b"), ("b", "c"), ("c", "a")]
    chunks = [[ScheduledMatch(f"{c}-{i}", pair, 100 * c + i) for i, pair in enumerate(pairs)]
              for c in range(2)]
    worker = subprocess.Popen([sys.executable, "-m", "scout_arena.tournament.worker", "n1",
                               str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert worker.stdin is not None and worker.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert worker.stdin is not None
        worker.stdin.write(json.dumps(message) + "\n")
        worker.stdin.flush()

    try:
        send({"config": config.to_json()})
        said = [json.loads(worker.stdout.readline())]
        assert said[0]["ready"]
        send({"chunk": 0, "items": items_to_json(chunks[0])})
        done: list[int] = []
        sent = 1
        while len(done) < 2:
            message = json.loads(worker.stdout.readline())
            said.append(message)
            if ("more" in message or "done" in message) and sent < 2:
                send({"chunk": 1, "items": items_to_json(chunks[1])})
                sent += 1
            if "done" in message:
                done.append(message["done"])
        worker.stdin.close()
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    records = [m["record"] for m in said if "record" in m]
    assert sorted(r["meta"]["tournament_key"] for r in records) == \
        sorted(m.key for chunk in chunks for m in chunk)
    asked = [i for i, m in enumerate(said) if "more" in m]
    assert asked and asked[0] < next(i for i, m in enumerate(said) if "done" in m)
    last_of_first = max(r["meta"]["ended_at"] for r in records
                        if r["meta"]["tournament_key"].startswith("0-"))
    assert min(r["meta"]["created_at"] for r in records
               if r["meta"]["tournament_key"].startswith("1-")) < last_of_first
    assert done == [0, 1]


def test_local_nodes_cut_chunks_smaller_as_the_schedule_runs_out() -> None:
    """Issue 30: chunks of a fixed size left one node playing a long last chunk alone while
    the others idled. Chunks are now cut as nodes ask, down to a node's concurrency at the
    end; a chunk size given is kept."""
    import asyncio

    from scout_arena.tournament import BotSpec, TournamentConfig
    from scout_arena.tournament.config import ScheduledMatch
    from scout_arena.tournament.distributed import MAX_CHUNK, _LocalWorkers

    config = TournamentConfig((BotSpec("a", "greedy"), BotSpec("b", "greedy")), concurrency=3)
    items = [ScheduledMatch(f"k{i}", ("a", "b"), i) for i in range(300)]

    def cut(chunk_size: int | None) -> list[list[ScheduledMatch]]:
        workers = _LocalWorkers(config, items, chunk_size, 2, lambda r, d: None, None, None,
                                asyncio.Event())
        chunks: list[list[ScheduledMatch]] = []
        while workers._has_work():
            index, chunk = workers._take()
            assert index == len(chunks)
            chunks.append(chunk)
        return chunks

    guided = cut(None)
    sizes = [len(c) for c in guided]
    assert [m for c in guided for m in c] == items
    assert sizes[0] == MAX_CHUNK and sizes == sorted(sizes, reverse=True)
    assert sizes[-2:] == [3, 3] or sizes[-1] < 3, sizes
    assert [len(c) for c in cut(40)] == [40] * 7 + [20]
