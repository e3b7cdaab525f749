"""`ladder recompute`: one snapshot of matches and ratings, a readable table of differences,
exit status 1 when there are some and 0 when none. Both backends."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from scout_arena.cli import main as scout_arena
from scout_arena.ratings import Rating, make_env, rate_table
from scout_ladder.repository import Repository, SeatResult
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

CLI = [sys.executable, "-m", "scout_arena.cli"]
ENV = make_env()


def play_rated(repo: Repository, ratings: dict[str, Rating], match_id: str,
               names: list[str], ranks: list[int], *, finish: bool = True) -> None:
    """Starts (and finishes) a rated match, rating it as the ladder does."""
    versions = {bot.name: bot.version for bot in repo.list_bots()}
    repo.start_match(match_id, len(names), 7, [(n, versions[n]) for n in names], True)
    if finish:
        finish_rated(repo, ratings, match_id, names, ranks)


def finish_rated(repo: Repository, ratings: dict[str, Rating], match_id: str,
                 names: list[str], ranks: list[int]) -> None:
    after = rate_table(ENV, [ratings.get(n, Rating()) for n in names], ranks)
    updates = {n: (r.mu, r.sigma) for n, r in zip(names, after, strict=True)}
    results = [SeatResult(seat=i, bot=n, score=10 - r, rank=r)
               for i, (n, r) in enumerate(zip(names, ranks, strict=True))]
    repo.finish_match(match_id, json.dumps({"match_id": match_id}), results, updates)
    ratings.update((n, Rating(mu, sigma)) for n, (mu, sigma) in updates.items())


@pytest.fixture
def played(ladder_url: str) -> Any:
    repo = Repository(ladder_url)
    repo.migrate()
    for name in ("a", "b", "c"):
        repo.register_bot(name, f"owner-{name}")
    ratings: dict[str, Rating] = {}
    for i, (names, ranks) in enumerate([(["a", "b"], [1, 2]), (["b", "c", "a"], [1, 2, 2]),
                                        (["c", "a"], [2, 1])]):
        play_rated(repo, ratings, f"m{i}", names, ranks)
    yield repo, ratings
    repo.close()


def test_recompute_reads_matches_and_ratings_in_one_snapshot(
        played: Any, ladder_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    repo, ratings = played
    play_rated(repo, ratings, "late", ["a", "c"], [1, 2], finish=False)
    reader = threading.current_thread()
    fired: list[str] = []

    def finish_late() -> None:
        with Repository(ladder_url) as writer:
            finish_rated(writer, ratings, "late", ["a", "c"], [1, 2])

    def meanwhile(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        # Right after the recompute first reads the matches, a live ladder finishes one.
        if threading.current_thread() is reader and not fired and "FROM matches" in statement:
            fired.append(statement)
            writer = threading.Thread(target=finish_late)
            writer.start()
            writer.join(120)

    event.listen(Engine, "after_cursor_execute", meanwhile)
    try:
        status = scout_arena(["ladder", "recompute", "--database", ladder_url])
    finally:
        event.remove(Engine, "after_cursor_execute", meanwhile)
    out = capsys.readouterr().out
    assert fired, "the recompute never read the matches"
    assert repo.get_match("late").status == "finished"
    assert (status, "match the recomputation exactly" in out) == (0, True), out
    assert "recomputed 3 rated matches" in out
    # And once it has finished, the late match is part of the history and agrees too.
    assert scout_arena(["ladder", "recompute", "--database", ladder_url]) == 0
    assert "recomputed 4 rated matches" in capsys.readouterr().out


def test_recompute_prints_differences_as_a_table_and_exits_1(
        played: Any, ladder_url: str) -> None:
    engine = create_engine(ladder_url)
    with engine.begin() as connection:
        connection.execute(text(
            "UPDATE ratings SET mu = mu + 0.5 WHERE bot_id = (SELECT id FROM bots WHERE "
            "name = 'b')"))
    engine.dispose()
    done = subprocess.run([*CLI, "ladder", "recompute", "--database", ladder_url],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    for heading in ("bot", "stored mu", "stored sigma", "recomputed mu", "recomputed sigma",
                    "delta mu"):
        assert heading in out
    row = next(line for line in out.splitlines() if " b " in line)
    assert "+0.5" in row and " a " not in out and " c " not in out
    assert "RatingInfo(" not in out and "Rating(" not in out and "match the" not in out
