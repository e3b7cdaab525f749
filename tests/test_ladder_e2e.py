"""The ladder for real: a dozen bot processes of different strength, a SIGKILL and a restart."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from scout.v1 import ladder_pb2, ladder_pb2_grpc
from scout_arena.record import replay
from scout_ladder.repository import Repository

RAWBOT = Path(__file__).parent / "bots" / "rawbot.py"
CLI = [sys.executable, "-m", "scout_arena.cli"]
GREEDY = [f"greedy{i}" for i in range(4)]
RANDOM = [f"random{i}" for i in range(6)]
FAULTY = ["hang", "illegal"]


def start_ladder(db: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [*CLI, "ladder", "serve", "--database", db, "--port", "0", "--table-sizes", "2,3,4",
         "--decision-ms", "300", "--time-bank-ms", "300", "--reconnect-grace", "3",
         "--admin-token", "adm", "--seed", "7", "-v"],
        stdout=subprocess.PIPE, stderr=log.open("a"), text=True)
    assert process.stdout is not None
    voided = ""
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"ladder did not start:\n{log.read_text()}")
        if line.startswith("voided"):
            voided = line
        found = re.search(r"listening on (\S+)", line)
        if found:
            return process, found.group(1) + ("\n" + voided if voided else "")


def start_bots(address: str, tokens: dict[str, str], logs: Path) -> list[subprocess.Popen[str]]:
    processes = []
    for name, token in tokens.items():
        if name in GREEDY:
            argv = [*CLI, "bot", "run", "greedy"]
        elif name in RANDOM:
            argv = [*CLI, "bot", "run", "random"]
        else:
            argv = [sys.executable, str(RAWBOT), name]
        env = {**os.environ, "SCOUT_ADDRESS": address, "SCOUT_TOKEN": token,
               "SCOUT_CONCURRENCY": "2"}
        processes.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                          stderr=(logs / f"{name}.log").open("a"), text=True))
    return processes


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise TimeoutError(what)


def finished(repo: Repository) -> list[str]:
    return [m.match_id for m in repo.list_matches(limit=100_000, status="finished")]


@pytest.mark.timeout(1500)
def test_ladder_rates_every_match_survives_sigkill_runs_challenges_and_probation(
        tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'ladder.db'}"
    repo = Repository(db)
    repo.migrate()
    registered = subprocess.run([*CLI, "ladder", "register", "greedy0", "--owner", "alice",
                                 "--database", db], capture_output=True, text=True, check=True)
    tokens = {"greedy0": registered.stdout.strip()}
    for i, name in enumerate([*GREEDY[1:], *RANDOM, *FAULTY]):
        tokens[name] = repo.register_bot(name, f"owner{i}")[1]
    assert repo.authenticate(tokens["greedy0"]).name == "greedy0"  # type: ignore[union-attr]

    log = tmp_path / "ladder.log"
    ladder, address = start_ladder(db, log)
    bots = start_bots(address, tokens, tmp_path)
    try:
        wait_for(lambda: len(finished(repo)) >= 30, 400, "30 matches before the kill")
        with grpc.insecure_channel(address) as channel:
            stub = ladder_pb2_grpc.LadderStub(channel)
            challenge = stub.Challenge(
                ladder_pb2.ChallengeRequest(opponents=["random0"], games=2),
                metadata=(("authorization", f"Bearer {tokens['greedy1']}"),), timeout=60)
            board = stub.GetLeaderboard(ladder_pb2.GetLeaderboardRequest(), timeout=60)
            profile = stub.GetBotProfile(ladder_pb2.GetBotProfileRequest(name="greedy2"),
                                         timeout=60)
            listed = stub.ListLadderMatches(
                ladder_pb2.ListLadderMatchesRequest(bot="greedy2", limit=50), timeout=60)
            done = next(m for m in listed.matches if m.status == "finished")
            record = stub.GetLadderRecord(
                ladder_pb2.GetLadderRecordRequest(match_id=done.match_id), timeout=60)
            admin = (("authorization", "Bearer adm"),)
            late = stub.RegisterBot(ladder_pb2.RegisterBotRequest(name="latecomer", owner="z"),
                                    metadata=admin, timeout=60)
            with pytest.raises(grpc.RpcError) as refused:
                stub.RegisterBot(ladder_pb2.RegisterBotRequest(name="x", owner="z"), timeout=60)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as missing:
                stub.GetBotProfile(ladder_pb2.GetBotProfileRequest(name="nobody"), timeout=60)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        assert len(board.entries) == 12
        assert [e.conservative for e in board.entries] == sorted(
            (e.conservative for e in board.entries), reverse=True)
        assert profile.bot.name == "greedy2" and len(profile.history) >= 1
        assert all(any(s.bot == "greedy2" for s in m.seats) for m in listed.matches)
        replay(json.loads(record.record_json))
        assert late.token and repo.authenticate(late.token).name == "latecomer"  # type: ignore[union-attr]
        assert repo.get_bot("latecomer").version == 1  # type: ignore[union-attr]
        before_kill = set(finished(repo))
        ladder.send_signal(signal.SIGKILL)
        ladder.wait(60)
        kept = set(finished(repo))
        assert before_kill <= kept
        ladder, banner = start_ladder(db, log)
        address = banner.splitlines()[0]
        for bot in bots:
            bot.send_signal(signal.SIGTERM)
        for bot in bots:
            bot.wait(60)
        bots = start_bots(address, tokens, tmp_path)
        wait_for(lambda: len(finished(repo)) >= len(kept) + 15, 400, "15 more after restart")
        wait_for(lambda: (c := repo.get_challenge(challenge.challenge_id)) is not None
                 and c.games_played >= 2, 300, "the challenge's games")
        # The restart's reconnects lifted their probation; their next bad matches restore it.
        wait_for(lambda: all((b := repo.get_bot(n)) is not None and b.probation_reason
                             for n in FAULTY), 300, "the faulty bots on probation again")
    finally:
        for bot in bots:
            bot.send_signal(signal.SIGTERM)
        ladder.send_signal(signal.SIGTERM)
        for process in [*bots, ladder]:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()

    assert kept <= set(finished(repo)), "a finished match was lost across the SIGKILL"
    voided = repo.list_matches(limit=100_000, status="void")
    assert all(m.void_reason for m in voided)
    # The restart voids what the SIGKILL left in flight, and says so; the clean stop at the end
    # settles its own matches ("the ladder was stopped") and leaves nothing in flight.
    at_restart = [m for m in voided if (m.void_reason or "").startswith("the ladder died")]
    assert all(m.match_id in banner for m in at_restart)
    assert bool(at_restart) == (len(banner.splitlines()) > 1)
    assert repo.list_matches(limit=100_000, status="in_flight") == []

    matches = repo.list_matches(limit=100_000, status="finished")
    challenge_games = [m for m in matches if m.challenge_id == challenge.challenge_id]
    assert len(challenge_games) >= 2 and not any(m.rated for m in challenge_games)
    assert all({s.bot for s in m.seats} == {"greedy1", "random0"} for m in challenge_games)
    history = {}
    for name in tokens:
        stored_profile = repo.bot_profile(name)
        assert stored_profile is not None
        history[name] = {p.match_id for p in stored_profile.history}
    for m in matches:
        for seat in m.seats:
            assert (m.match_id in history[seat.bot]) == m.rated, (m.match_id, seat.bot)
        record = json.loads(repo.get_record(m.match_id) or "{}")
        replay(record)

    recompute = subprocess.run([*CLI, "ladder", "recompute", "--database", db],
                               capture_output=True, text=True)
    assert recompute.returncode == 0, recompute.stdout + recompute.stderr
    assert "match the recomputation exactly" in recompute.stdout

    ratings = repo.ratings()
    greedy_mu = statistics.fmean(ratings[n].mu for n in GREEDY)
    random_mu = statistics.fmean(ratings[n].mu for n in RANDOM)
    assert greedy_mu > random_mu + 3, (greedy_mu, random_mu)
    board_names = [row.bot for row in repo.leaderboard()]
    assert set(board_names[:4]) & set(GREEDY), board_names

    for name in FAULTY:
        stored = repo.get_bot(name)
        assert stored is not None and stored.probation_reason, name
    shown = subprocess.run([*CLI, "ladder", "bot", "hang", "--database", db],
                           capture_output=True, text=True, check=True)
    assert "probation" in shown.stdout
    printed = subprocess.run([*CLI, "ladder", "leaderboard", "--database", db],
                             capture_output=True, text=True, check=True)
    assert "greedy" in printed.stdout
