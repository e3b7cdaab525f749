"""What the ladder storage tests (tests/test_ladder_storage_*.py) share: a clock to pin times, a
repository on it, the raw engine, and short ways to register bots and play matches."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from scout_ladder import (
    BotInfo,
    MatchSummary,
    Repository,
    SeatResult,
)
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine

START = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """A clock that moves one second per reading, so finish order is unambiguous."""

    def __init__(self) -> None:
        self.now = START
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=1)
            return self.now


@pytest.fixture(name="clocked")
def clocked_fixture(ladder_url: str) -> Iterator[Repository]:
    """Like ``repository`` but on the ticking Clock."""
    with Repository(ladder_url, clock=Clock()) as repo:
        repo.migrate()
        yield repo


@pytest.fixture(name="raw")
def raw_fixture(ladder_url: str) -> Iterator[Engine]:
    """A plain engine on the same database, to look under the repository."""
    engine = create_engine(ladder_url)
    yield engine
    engine.dispose()


def register(repo: Repository, *names: str, owner: str = "alice") -> dict[str, str]:
    return {name: repo.register_bot(name, owner)[1] for name in names}


def start(
    repo: Repository,
    match_id: str,
    names: Sequence[str],
    *,
    rated: bool = True,
    seed: int = 7,
    challenge_id: int | None = None,
) -> None:
    versions = {bot.name: bot.version for bot in repo.list_bots(include_retired=True)}
    repo.start_match(
        match_id, len(names), seed, [(n, versions[n]) for n in names], rated, challenge_id
    )


def results(names: Sequence[str], ranks: Sequence[int], **extra: Any) -> list[SeatResult]:
    return [
        SeatResult(seat=i, bot=name, score=10 * (len(names) - rank), rank=rank, **extra)
        for i, (name, rank) in enumerate(zip(names, ranks, strict=True))
    ]


def record(match_id: str) -> str:
    return json.dumps({"format": "scout-arena-match-record", "match_id": match_id})


def play(
    repo: Repository,
    match_id: str,
    names: Sequence[str],
    ranks: Sequence[int],
    ratings: dict[str, tuple[float, float]] | None = None,
    *,
    rated: bool = True,
    seed: int = 7,
) -> None:
    start(repo, match_id, names, rated=rated, seed=seed)
    if ratings is None:
        ratings = {n: (25.0 - r, 8.0) for n, r in zip(names, ranks, strict=True)} if rated else {}
    repo.finish_match(match_id, record(match_id), results(names, ranks), ratings)


def bot_of(repo: Repository, name: str) -> BotInfo:
    bot = repo.get_bot(name)
    assert bot is not None, name
    return bot


def match_of(repo: Repository, match_id: str) -> MatchSummary:
    match = repo.get_match(match_id)
    assert match is not None, match_id
    return match


def dump_rows(engine: Engine) -> str:
    """Every row of every table, as text."""
    out = []
    with engine.connect() as connection:
        for table in inspect(connection).get_table_names():
            for row in connection.execute(text(f'SELECT * FROM "{table}"')):
                out.append(f"{table}: {tuple(row)!r}")
    return "\n".join(out)
