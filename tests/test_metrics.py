"""Prometheus metrics (`scout_arena.server.metrics`): a real `referee serve --metrics-port 0`
and `ladder serve --metrics-port 0`, real bots, /metrics scraped over HTTP on 127.0.0.1."""

from __future__ import annotations

import gc
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from referee_support import (
    RefereeProcess,
    create_match,
    fetch_record,
    running_referee,
    start_bot,
    stop,
    wait_connected,
    wait_finished,
)
from scout.v1 import matches_pb2
from scout_arena.server.hardening.gcpolicy import watch_gc_pauses
from scout_arena.server.metrics import RefereeMetrics

pytestmark = pytest.mark.timeout(120)

RAWBOT = Path(__file__).resolve().parent / "bots" / "rawbot.py"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def metrics_url(referee: RefereeProcess) -> str:
    """The line `referee serve` prints after "listening on"."""
    assert referee.process.stdout is not None
    line = referee.process.stdout.readline()
    found = re.fullmatch(r"metrics on (http://127\.0\.0\.1:(\d+)/metrics)\n", line)
    assert found is not None and int(found.group(2)) > 0, line
    return found.group(1)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_match_of_two_greedy_bots_is_counted(tmp_path: Path) -> None:
    tokens = {"g0": "token-g0", "g1": "token-g1"}
    with running_referee(tmp_path, tokens, "--metrics-port", "0") as referee:
        url = metrics_url(referee)
        before = scrape(url)
        assert value(before, "scout_connected_bots") == 0
        assert value(before, "scout_running_matches") == 0
        assert value(before, "scout_matches_finished_total", status="finished") == 0
        for token in tokens.values():
            start_bot(referee, "greedy", token)
        wait_connected(referee, list(tokens))
        wait_until(lambda: value(scrape(url), "scout_connected_bots") == 2)
        channel, stub = referee.matches_stub()
        with channel:
            info = create_match(stub, list(tokens), seed=13)
            finished = wait_finished(stub, info.match_id)
            assert finished.status == matches_pb2.MATCH_STATUS_FINISHED
            record = fetch_record(stub, info.match_id)
        samples = scrape(url)

    timeouts = [n for n in record["notes"] if n["kind"] == "timeout"]
    assert not timeouts and not record["forfeits"]
    actions = sum(len(r["actions"]) for r in record["rounds"])
    rotations = sum(len(r["rotations"]) for r in record["rounds"])
    assert actions > 0 and rotations == 2 * len(record["rounds"])

    assert value(samples, "scout_connected_bots") == 2
    assert value(samples, "scout_running_matches") == 0
    assert value(samples, "scout_matches_finished_total", status="finished") == 1
    assert value(samples, "scout_matches_finished_total", status="aborted") == 0
    for kind, count in (("decision", actions), ("rotation", rotations)):
        assert value(samples, "scout_decisions_answered_total", kind=kind) == count
        assert value(samples, "scout_decision_latency_seconds_count", kind=kind) == count
        assert value(samples, "scout_decision_latency_seconds_bucket", kind=kind,
                     le="+Inf") == count
        total_s = value(samples, "scout_decision_latency_seconds_sum", kind=kind)
        assert 0 < total_s < count * 1.0  # each within the default 1 s decision time
    assert value(samples, "scout_time_losses_total") == 0
    assert value(samples, "scout_forfeits_total") == 0
    assert value(samples, "scout_bank_draws_total") <= actions + rotations
    # The loop was sampled every 5 ms while the match ran.
    assert value(samples, "scout_event_loop_lag_seconds_count") > 0
    assert value(samples, "scout_event_loop_lag_seconds_bucket", le="+Inf") == \
        value(samples, "scout_event_loop_lag_seconds_count")
    # `referee serve` times its collections: a whole match makes young ones.
    assert value(samples, "scout_gc_pause_seconds_count", generation="0") > 0
    assert value(samples, "process_resident_memory_bytes") > 10_000_000
    assert ("python_info", frozenset()) not in samples  # python_info has labels
    assert any(name == "python_info" for name, _ in samples)


def test_a_bot_that_never_answers_loses_on_time_and_forfeits(tmp_path: Path) -> None:
    tokens = {"greedy": "token-greedy", "hang": "token-hang"}
    with running_referee(tmp_path, tokens, "--metrics-port", "0") as referee:
        url = metrics_url(referee)
        start_bot(referee, "greedy", tokens["greedy"])
        # A raw-protocol bot (the SDK would send its own fallback before the deadline).
        env = {**os.environ, "SCOUT_ADDRESS": referee.address, "SCOUT_TOKEN": tokens["hang"]}
        referee.bots.append(subprocess.Popen(
            [sys.executable, str(RAWBOT), "hang"], env=env, stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "hang.log").open("w"), text=True))
        wait_connected(referee, list(tokens))
        channel, stub = referee.matches_stub()
        with channel:
            info = create_match(stub, list(tokens), seed=5, decision_ms=150, time_bank_ms=1)
            finished = wait_finished(stub, info.match_id)
            assert finished.status == matches_pb2.MATCH_STATUS_FINISHED
            record = fetch_record(stub, info.match_id)
        samples = scrape(url)

    # The hanging seat times out three times (a strike each) and forfeits; the greedy seat
    # answers everything else (with 150 ms a decision, in time even on a loaded machine).
    timeouts = [n for n in record["notes"] if n["kind"] == "timeout"]
    assert [n["seat"] for n in timeouts] == [1, 1, 1] and record["forfeits"] == [1]
    assert value(samples, "scout_time_losses_total") == 3
    assert value(samples, "scout_forfeits_total") == 1
    assert value(samples, "scout_matches_finished_total", status="finished") == 1
    assert value(samples, "scout_decisions_answered_total", kind="rotation") == \
        len(record["rounds"])
    greedy_actions = sum(1 for r in record["rounds"] for a in r["actions"] if a["seat"] == 0)
    assert value(samples, "scout_decisions_answered_total", kind="decision") == greedy_actions
    assert value(samples, "scout_decision_latency_seconds_count", kind="decision") == \
        greedy_actions
    assert value(samples, "scout_bank_draws_total") <= greedy_actions + len(record["rounds"])


def test_answers_over_the_decision_time_are_bank_draws() -> None:
    metrics = RefereeMetrics()
    metrics.answered_request("decision", 0.2, 1.0)
    metrics.answered_request("decision", 1.5, 1.0)
    metrics.answered_request("rotation", 0.01, 1.0)
    registry = metrics.registry
    assert registry.get_sample_value("scout_bank_draws_total") == 1
    assert registry.get_sample_value("scout_decisions_answered_total", {"kind": "decision"}) == 2
    assert registry.get_sample_value("scout_decision_latency_seconds_sum",
                                     {"kind": "decision"}) == pytest.approx(1.7)
    # A second referee in the same process has registries of its own: nothing clashes.
    other = RefereeMetrics()
    assert other.registry.get_sample_value("scout_bank_draws_total") == 0


def serve_ladder(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """``ladder serve --metrics-port 0`` on a fresh SQLite database, its stdout lines queued."""
    database = f"sqlite:///{tmp_path / 'ladder.db'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "scout_arena.cli", "ladder", "serve", "--database", database,
         "--port", "0", "--admin-token", "adm", "--metrics-port", "0", *extra],
        stdout=subprocess.PIPE, stderr=(tmp_path / "ladder.log").open("w"), text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return process, lines


def metrics_url_in(line: str) -> str | None:
    found = re.fullmatch(r"metrics on (http://127\.0\.0\.1:\d+/metrics)\n", line)
    return found.group(1) if found else None


def test_the_ladder_serves_its_referees_metrics(tmp_path: Path) -> None:
    process, lines = serve_ladder(tmp_path)
    try:
        url = None
        while url is None:
            url = metrics_url_in(lines.get(timeout=60))
        samples = scrape(url)
        assert value(samples, "scout_connected_bots") == 0
        assert value(samples, "scout_running_matches") == 0
    finally:
        assert stop(process, timeout=30) == 0, (tmp_path / "ladder.log").read_text()


def test_a_ladder_with_local_nodes_counts_them_in_its_metrics(tmp_path: Path) -> None:
    process, lines = serve_ladder(tmp_path, "--nodes", "2", "--node-records",
                                  str(tmp_path / "nodes"))
    try:
        url = None
        nodes_line = ""
        while not (url and nodes_line):
            line = lines.get(timeout=90)
            url = metrics_url_in(line) or url
            nodes_line = line if "local referee nodes on" in line else nodes_line
        deadline = time.monotonic() + 30
        while value(scrape(url), "scout_ladder_nodes") != 2:
            assert time.monotonic() < deadline, "the ladder never counted its 2 nodes"
            time.sleep(0.2)
        assert value(scrape(url), "scout_ladder_node_matches") == 0
    finally:
        assert stop(process, timeout=60) == 0, (tmp_path / "ladder.log").read_text()


def test_every_garbage_collection_is_timed_by_generation() -> None:
    """`watch_gc_pauses` (which `referee serve` points at scout_gc_pause_seconds): a full
    collection stops every match at once, so the operator sees each one and how long it was."""
    metrics = RefereeMetrics()
    seen: list[tuple[int, float]] = []

    def observe(generation: int, seconds: float) -> None:
        seen.append((generation, seconds))
        metrics.gc_paused(generation, seconds)

    stop_watching = watch_gc_pauses(observe)
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        stop_watching()
    assert [g for g, _ in seen[-2:]] == [2, 0] and all(s >= 0 for _, s in seen)
    count = len(seen)
    gc.collect()
    assert len(seen) == count  # no longer watched
    pauses = metrics.registry.get_sample_value("scout_gc_pause_seconds_count", {"generation": "2"})
    assert pauses is not None and pauses >= 1


def test_gc_policy_freezes_startup_objects_and_collects_the_young_by_the_clock() -> None:
    """`tune_gc` in a fresh interpreter, inside an event loop as `referee serve` calls it: what
    exists at start is frozen (no collection walks it again), the count's thresholds are the
    policy's, and the young generations are collected every `YOUNG_PERIOD_S` with no
    allocation to trigger them, generation 0 and 1 by turns; a second call changes nothing."""
    script = (
        "import asyncio, gc, json\n"
        "from scout_arena.server.hardening.gcpolicy import THRESHOLDS, YOUNG_PERIOD_S, tune_gc\n"
        "seen = []\n"
        "async def main():\n"
        "    before = gc.get_freeze_count()\n"
        "    tune_gc()\n"
        "    frozen = gc.get_freeze_count()\n"
        "    garbage = [[] for _ in range(1000)]\n"
        "    tune_gc()\n"
        "    gc.callbacks.append(lambda phase, info: phase == 'stop' and"
        " seen.append(info['generation']))\n"
        "    await asyncio.sleep(YOUNG_PERIOD_S * 6.5)\n"
        "    print(json.dumps([before, frozen, gc.get_freeze_count(), gc.get_threshold(),"
        " list(THRESHOLDS), seen]))\n"
        "asyncio.run(main())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    before, frozen, after_second_call, thresholds, policy, seen = json.loads(done.stdout)
    assert before == 0 and frozen > 10_000
    assert after_second_call <= frozen  # the 1,000 new lists are not frozen
    assert thresholds == policy and policy[0] > 700 and policy[1] == 1
    assert len(seen) >= 4 and set(seen) == {0, 1}, seen
    assert all(seen[i] != seen[i + 1] for i in range(len(seen) - 1)), seen
