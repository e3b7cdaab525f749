"""The ladder's storage layer, on SQLite and on PostgreSQL (every test runs on both; the fixtures
``repository`` and ``ladder_url`` come from conftest.py, the rest from
tests/support/ladder_storage.py): migrations and the database engines."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from scout_ladder import (
    Repository,
    alembic_config,
)
from scout_ladder.models import Base
from sqlalchemy import text
from sqlalchemy.engine import Engine
from support.ladder_storage import (
    Clock,
    play,
    raw_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
    record,
    register,
)


def test_migrations_run_twice_without_harm(ladder_url: str, raw: Engine) -> None:
    with Repository(ladder_url) as repo:
        repo.migrate()
        register(repo, "a", "b")
        play(repo, "m1", ["a", "b"], [1, 2])
        repo.migrate()
    with Repository(ladder_url) as again:
        again.migrate()
        assert [b.name for b in again.list_bots()] == ["a", "b"]
        assert again.get_record("m1") == record("m1")
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with raw.connect() as connection:
        versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    assert [tuple(v) for v in versions] == [(head,)]


def test_concurrent_first_migrations_agree(ladder_url: str) -> None:
    repos = [Repository(ladder_url) for _ in range(3)]
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            list(pool.map(lambda repo: repo.migrate(), repos))
        register(repos[0], "a")
        assert repos[2].get_bot("a") is not None
    finally:
        for repo in repos:
            repo.close()


def test_the_migrations_build_exactly_the_models(repository: Repository, raw: Engine) -> None:
    with raw.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_sqlite_runs_with_foreign_keys_and_wal(tmp_path: Path) -> None:
    with Repository(f"sqlite:///{tmp_path / 'l.db'}") as repo:
        repo.migrate()
        with repo._engine.connect() as connection:  # the repository's own connections
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_an_in_memory_sqlite_is_one_database_for_all_threads() -> None:
    with Repository("sqlite://") as repo:
        repo.migrate()
        register(repo, "a", "b")
        with ThreadPoolExecutor(max_workers=4) as pool:
            names = list(pool.map(lambda _: [b.name for b in repo.list_bots()], range(8)))
        assert names == [["a", "b"]] * 8


def test_other_databases_are_refused() -> None:
    with pytest.raises(ValueError, match="sqlite or postgresql"):
        Repository("mysql://localhost/ladder")


def test_times_come_back_in_utc(ladder_url: str) -> None:
    clock = Clock()
    plus_five = timezone(timedelta(hours=5))
    with Repository(ladder_url, clock=lambda: clock().astimezone(plus_five)) as repo:
        repo.migrate()
        bot, _ = repo.register_bot("a", "alice")
        assert bot.created_at.tzinfo == UTC
        stored = repo.get_bot("a")
        assert stored is not None and stored.created_at == bot.created_at
        assert stored.created_at.tzinfo == UTC
