"""Hosted bots on a real ladder, end to end: owners sign up and submit through the CLI, the
ladder validates each version in its sandbox, and hosted bots play rated matches in one pool
with remote bots; hostile hosted bots cost only their own seats and are paused."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import grpc
import pytest
from scout.v1 import ladder_pb2, ladder_pb2_grpc
from scout_arena.sandbox import pack_folder
from scout_ladder.repository import Repository
from support.hostedladder import Ladder, hosting_ladder, remote_bots, stop, wait_for
from support.hosting import bot_folder

GO_KIT = Path(__file__).resolve().parent.parent / "clients" / "go"


def _profile(ladder: Ladder, name: str) -> ladder_pb2.BotProfile:
    with grpc.insecure_channel(ladder.address) as channel:
        return ladder_pb2_grpc.LadderStub(channel).GetBotProfile(
            ladder_pb2.GetBotProfileRequest(name=name), timeout=30)


def _matches(ladder: Ladder, name: str) -> list[ladder_pb2.LadderMatch]:
    with grpc.insecure_channel(ladder.address) as channel:
        return list(ladder_pb2_grpc.LadderStub(channel).ListLadderMatches(
            ladder_pb2.ListLadderMatchesRequest(bot=name, limit=200), timeout=30).matches)


def _rated(ladder: Ladder, name: str) -> list[ladder_pb2.LadderMatch]:
    return [m for m in _matches(ladder, name) if m.status == "finished" and m.rated]


def _paused(ladder: Ladder, name: str) -> bool:
    return bool(_profile(ladder, name).bot.paused_reason)


def _games(ladder: Ladder, name: str) -> int:
    """Rated matches the bot has played, from the standings (a match list is capped)."""
    with grpc.insecure_channel(ladder.address) as channel:
        board = ladder_pb2_grpc.LadderStub(channel).GetLeaderboard(
            ladder_pb2.GetLeaderboardRequest(), timeout=30)
    return next((e.games for e in board.entries if e.bot.name == name), 0)


def _remote_pool(ladder: Ladder, count: int) -> tuple[dict[str, str], list[subprocess.Popen[str]]]:
    tokens = {f"remote{index}": ladder.remote_bot(f"remote{index}") for index in range(count)}
    return tokens, remote_bots(ladder.address, tokens)


def _plays_rated_beside_remote_bots(ladder: Ladder, tmp_path: Path) -> None:
    alice = ladder.signup("alice")
    submitted = ladder.cli("submit", "counter", str(bot_folder("counter", tmp_path)),
                           owner_token=alice)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "passed validation" in submitted.stdout
    _, remotes = _remote_pool(ladder, 2)
    try:
        def beside_remote() -> bool:
            rated = _rated(ladder, "counter")
            return len(rated) >= 2 and any(s.bot.startswith("remote") for m in rated
                                           for s in m.seats)

        wait_for(beside_remote, 240, "2 rated matches of the hosted bot, one with a remote bot")
        rated = _rated(ladder, "counter")
        assert all(not s.forfeited for m in rated for s in m.seats)
        profile = _profile(ladder, "counter")
        assert len(profile.history) >= 2 and not profile.bot.paused_reason
        logs = ladder.cli("logs", "counter", owner_token=alice)
        assert logs.returncode == 0 and "run number" in logs.stdout, logs.stderr
        target = tmp_path / "downloaded"
        data = ladder.cli("data", "counter", str(target), owner_token=alice)
        assert data.returncode == 0, data.stderr
        assert int((target / "count").read_text()) >= 2  # one folder across its matches
        stranger = ladder.signup("mallory")
        refused = ladder.cli("logs", "counter", owner_token=stranger)
        assert refused.returncode != 0 and "run number" not in refused.stdout
        refused = ladder.cli("data", "counter", str(tmp_path / "stolen"), owner_token=stranger)
        assert refused.returncode != 0 and not (tmp_path / "stolen" / "count").exists()
    finally:
        stop(remotes)


@pytest.mark.timeout(600)
def test_a_submitted_bot_is_validated_and_plays_rated_beside_remote_bots(
        ladder_url: str, tmp_path: Path) -> None:
    with hosting_ladder(ladder_url, tmp_path) as ladder:
        _plays_rated_beside_remote_bots(ladder, tmp_path)


def _go_package() -> Path:
    """The Go kit's submission, as its `make package` builds it (a static binary)."""
    built = subprocess.run(["make", "-C", str(GO_KIT), "package"], capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    return GO_KIT / "dist" / "scout-bot.tar.gz"


@pytest.mark.timeout(900)
def test_hosted_bots_and_a_compiled_kit_play_on_the_ladders_local_nodes(tmp_path: Path) -> None:
    package = _go_package()
    with hosting_ladder(f"sqlite:///{tmp_path / 'ladder.db'}", tmp_path, "--nodes", "2",
                        "--node-records", str(tmp_path / "node-records")) as ladder:
        gopher = ladder.signup("gopher")
        submitted = ladder.cli("submit", "gobot", str(package), owner_token=gopher)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        _plays_rated_beside_remote_bots(ladder, tmp_path)
        wait_for(lambda: len(_rated(ladder, "gobot")) >= 1, 240, "a rated match of the Go bot")
        records = [r.read_text() for r in (tmp_path / "node-records").glob("local-*/*.json")]
        assert any('"counter"' in r for r in records)
        assert any('"gobot"' in r for r in records)


@pytest.mark.timeout(300)
def test_a_bot_crashing_at_start_is_rejected_and_the_cli_says_why(tmp_path: Path) -> None:
    with hosting_ladder(f"sqlite:///{tmp_path / 'ladder.db'}", tmp_path) as ladder:
        owner = ladder.signup("alice")
        done = ladder.cli("submit", "crasher", str(bot_folder("crash_at_start", tmp_path)),
                          owner_token=owner)
        assert done.returncode != 0
        assert "rejected" in done.stderr and "never connected" in done.stderr
        assert "ZeroDivisionError on purpose" in done.stderr
        versions = ladder.cli("versions", "crasher", owner_token=owner)
        assert "rejected" in versions.stdout


@pytest.mark.timeout(900)
def test_hostile_hosted_bots_cost_only_their_own_seats_and_are_paused(tmp_path: Path) -> None:
    with hosting_ladder(f"sqlite:///{tmp_path / 'ladder.db'}", tmp_path) as ladder:
        owners = {}
        for name, kind in (("crasher", "crash_when_rated"), ("silent", "silent_when_rated"),
                           ("forker", "hog_when_rated"), ("hoarder", "hog_when_rated"),
                           ("prober", "tcp_probe")):
            owners[name] = ladder.signup(f"owner-{name}")
            folder = bot_folder(kind, tmp_path / name,
                                probe=ladder.address if kind == "tcp_probe" else "")
            if name in ("forker", "hoarder"):
                (folder / "mode.txt").write_text("processes" if name == "forker" else "memory")
            done = ladder.cli("submit", name, str(folder), owner_token=owners[name])
            assert done.returncode == 0, done.stdout + done.stderr
        _, remotes = _remote_pool(ladder, 3)
        try:
            wait_for(lambda: bool(_profile(ladder, "crasher").bot.paused_reason), 300,
                     "the crashing bot paused")
            wait_for(lambda: bool(_profile(ladder, "silent").bot.paused_reason), 300,
                     "the silent bot paused")
            for hog in ("forker", "hoarder"):
                wait_for(functools.partial(_paused, ladder, hog), 300, f"{hog} paused")
            assert "failed" in _profile(ladder, "crasher").bot.paused_reason
            assert "never connected" in _profile(ladder, "silent").bot.paused_reason
            for name in ("crasher", "silent", "forker", "hoarder"):
                ended = [m for m in _matches(ladder, name) if m.status == "finished"]
                assert ended, name
                for match in ended:  # it forfeited; the others played on to the end
                    seats = {s.bot: s for s in match.seats}
                    assert seats[name].forfeited
                    assert not any(s.forfeited for b, s in seats.items()
                                   if b not in ("crasher", "silent", "forker", "hoarder"))
            logs = ladder.cli("logs", "crasher", owner_token=owners["crasher"])
            assert "crashing in a ladder match on purpose" in logs.stdout
            for hog, words in (("forker", "killed: reached the limit of"),
                               ("hoarder", "killed: memory limit of")):
                logs = ladder.cli("logs", hog, owner_token=owners[hog])
                assert "hogging" in logs.stdout and words in logs.stdout, logs.stdout[-500:]
            wait_for(lambda: len(_rated(ladder, "prober")) >= 1, 240, "a prober match")
            logs = ladder.cli("logs", "prober", owner_token=owners["prober"])
            assert f"PROBE {ladder.address}: refused" in logs.stdout, logs.stdout
            assert "CONNECTED" not in logs.stdout
            count = _games(ladder, "remote0")
            wait_for(lambda: _games(ladder, "remote0") > count, 120,
                     "remote bots still playing")
        finally:
            stop(remotes)


@pytest.mark.timeout(300)
def test_a_version_left_validating_is_validated_when_the_ladder_starts(tmp_path: Path) -> None:
    """A version stored as validating (the ladder stopped before its verdict) is checked by
    the next ladder to start on the database."""
    db = f"sqlite:///{tmp_path / 'ladder.db'}"
    repo = Repository(db, storage=tmp_path / "storage")
    repo.migrate()
    repo.create_owner("alice")
    stored = repo.submit_version("leftover", as_owner="alice",
                                 archive=pack_folder(bot_folder("greedy", tmp_path)),
                                 runtime="python",
                                 command=("python", "-m", "scout_client", "run", "greedy"))
    assert stored.status == "validating"
    with hosting_ladder(db, tmp_path):
        wait_for(lambda: repo.get_version("leftover", stored.version, as_owner=None).status
                 != "validating", 120, "the verdict on the leftover version")
        decided = repo.get_version("leftover", stored.version, as_owner=None)
        assert decided.status == "active", decided.reason
        assert "match 2 of the check" in (decided.validation_output or "")
    repo.close()
