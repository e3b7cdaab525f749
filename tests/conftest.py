"""Shared fixtures: the ladder's storage, on SQLite and on PostgreSQL.

The ladder is imported inside the fixtures, so that the other tests run even where the
ladder's database libraries are missing. PostgreSQL comes from ``SCOUT_TEST_POSTGRES_URL``
(``make pytest`` starts one with .ci/postgres.sh and sets it); each test gets a schema of its
own, dropped afterwards, so tests may run in parallel against one database.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from support.kits import BUILDS, KITS, built_kits, kit_packages  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from scout_ladder.repository import Repository

POSTGRES_URL_VARIABLE = "SCOUT_TEST_POSTGRES_URL"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tells the kit builds which kits this session's tests need (tests/support/kits.py), so
    that the first test that needs one builds them all side by side: the kits named by the
    `name` parameter of a test that asks for the builds. (A test that asks for a kit it is not
    parametrized with builds it when it asks.)"""
    for item in items:
        if not {"built_kits", "kit_packages"} & set(getattr(item, "fixturenames", ())):
            continue
        name = getattr(getattr(item, "callspec", None), "params", {}).get("name")
        if name in KITS:
            BUILDS.want([name])


@pytest.fixture(scope="session")
def _postgres_admin() -> Iterator[Any]:
    """An engine on the test database, to create and drop the per-test schemas."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if not url:
        reason = (
            f"{POSTGRES_URL_VARIABLE} is not set: run `make postgres` (or "
            f"`eval $(bash .ci/postgres.sh)`) to start a test PostgreSQL"
        )
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI must test the PostgreSQL backend too; {reason}")
        pytest.skip(reason)
    from sqlalchemy import create_engine

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@contextlib.contextmanager
def _postgres_schema(admin: Any) -> Iterator[str]:
    """The URL of a fresh schema of the test PostgreSQL, dropped afterwards."""
    from sqlalchemy import text

    schema = f"ladder_test_{uuid.uuid4().hex[:16]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        # search_path puts every table, and Alembic's version table, into that schema.
        yield admin.url.update_query_dict(
            {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(params=["sqlite", "postgresql"])
def ladder_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """The URL of an empty ladder database: a file for SQLite, a fresh schema for PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ladder.db'}"
        return
    with _postgres_schema(request.getfixturevalue("_postgres_admin")) as url:
        yield url


@pytest.fixture
def postgres_url(_postgres_admin: Any) -> Iterator[str]:
    """An empty ladder database on PostgreSQL only (the multi-process tests, issue 13)."""
    with _postgres_schema(_postgres_admin) as url:
        yield url


@pytest.fixture
def repository(ladder_url: str) -> Iterator[Repository]:
    """A migrated, empty :class:`scout_ladder.repository.Repository`, on both backends."""
    from scout_ladder.repository import Repository

    repo = Repository(ladder_url)
    repo.migrate()
    yield repo
    repo.close()
