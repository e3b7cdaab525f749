"""The ladder database's engine, schema migration and transactions, for SQLite and PostgreSQL.

PostgreSQL runs the ladder in production, SQLite a single box and the tests; both run the same
Alembic migrations. SQLite gets ``foreign_keys=ON`` (off by default there), WAL (readers do not
block the writer) and ``BEGIN IMMEDIATE`` for writes (two deferred transactions that both
upgrade to writing would otherwise fail at once instead of waiting for the busy timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from . import lease
from .files import FileStore, OwnerLimits, default_storage

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

_SQLITE_BUSY_TIMEOUT_S = 30.0
_WRITE_OPTION = "scout_ladder_write"

# Alembic keeps the running migration's context in module globals (alembic.context, alembic.op),
# so two migrations in one process must not overlap, whatever their databases.
_ALEMBIC_LOCK = threading.Lock()


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration for the ladder's migrations, built in code so that no
    alembic.ini is needed. With a URL it also works for ``alembic.command`` calls by hand
    (``command.revision(alembic_config(url), autogenerate=True, message=...)``)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        rendered = url.render_as_string(hide_password=False) if isinstance(url, URL) else url
        # ConfigParser interpolation would read a '%' in a password as a reference.
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def is_transient(exc: BaseException) -> bool:
    """Whether a failed call is worth repeating as it was: the connection or the server went
    away, a lock or serialization conflict, a pool or lock timeout. Never the repository's own
    refusals (:class:`~.errors.StorageError`) nor a violated constraint: those fail again."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        exc,
        sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError
        | sa_exc.DisconnectionError,
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Database:
    """One SQLAlchemy engine (and so one connection pool) shared by every thread, and the one
    way the queries reach it: :meth:`_transaction`, one per public call.

    ``url`` is a SQLAlchemy URL: ``sqlite:///path/ladder.db`` or
    ``postgresql+psycopg://user:password@host/db``. ``clock`` gives the current time (tests
    pass a fake one to control the finish order). ``storage`` is the folder of hosted bots'
    uploads and data (default: :func:`~.files.default_storage`); ``limits`` what each owner
    account may do.
    """

    def __init__(
        self,
        url: str | URL,
        *,
        echo: bool = False,
        clock: Callable[[], datetime] | None = None,
        storage: str | Path | None = None,
        limits: OwnerLimits | None = None,
    ) -> None:
        self._url = make_url(url)
        self._clock = clock or _utc_now
        self.files = FileStore(Path(storage) if storage is not None
                               else default_storage(self._url))
        self.limits = limits or OwnerLimits()
        self._backend = self._url.get_backend_name()
        self._memory_lock: threading.RLock | None = None
        if self._backend == "sqlite":
            self._engine = self._sqlite_engine(echo)
        elif self._backend == "postgresql":
            self._engine = create_engine(self._url, echo=echo, pool_pre_ping=True)
        else:
            raise ValueError(f"the ladder stores to sqlite or postgresql, not {self._backend}")

    def _sqlite_engine(self, echo: bool) -> Engine:
        database = self._url.database
        in_memory = database in (None, "", ":memory:")
        connect_args = {"timeout": _SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
        if in_memory:
            # One connection for everybody, or each thread would see its own empty database;
            # the lock keeps the threads' transactions on it from interleaving.
            self._memory_lock = threading.RLock()
            engine = create_engine(
                self._url, echo=echo, connect_args=connect_args, poolclass=StaticPool
            )
        else:
            engine = create_engine(self._url, echo=echo, connect_args=connect_args)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
            # Let SQLAlchemy's "begin" hook below issue BEGIN, not the sqlite3 module, so that
            # writes can say IMMEDIATE and DDL runs inside the migration's transaction.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={int(_SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            write = connection.get_execution_options().get(_WRITE_OPTION, False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine

    def _now(self) -> datetime:
        """The clock's time in UTC, so that what a call returns equals what it stored."""
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the ladder's clock must give timezone-aware datetimes")
        return now.astimezone(UTC)

    @property
    def backend(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self._backend

    @property
    def url(self) -> str:
        """The database URL with the password hidden, for logs."""
        return self._url.render_as_string(hide_password=True)

    def close(self) -> None:
        """Closes the pooled connections."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def exists(self) -> bool:
        """Whether the URL names a ladder database already (its schema was migrated once).

        Creates nothing: a SQLite file that is not there is not created (it is opened read-only
        when it is), and an in-memory database never exists beforehand. The commands that only
        read check this first, so that a misspelled URL is an error, not an empty ladder.
        """
        if self._backend == "sqlite":
            database = self._url.database
            if database in (None, "", ":memory:") or not Path(database).is_file():
                return False
            try:
                uri = Path(database).resolve().as_uri() + "?mode=ro"
                with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
                    found = connection.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' "
                        "AND name = 'alembic_version'"
                    ).fetchone()
            except sqlite3.DatabaseError:
                return False
            return found is not None
        with self._engine.connect() as connection:
            return bool(
                connection.execute(text("SELECT to_regclass('alembic_version') IS NOT NULL"))
                .scalar_one()
            )

    def ping(self) -> None:
        """One round trip to the database (``SELECT 1``); raises what the driver raises when
        it does not answer (the ladder's readiness check, `scout_ladder.dbhealth`)."""
        with self._locked(), self._engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1").scalar_one()

    def acquire_lease(self, wait_s: float = 3.0) -> lease.Lease:
        """The lease that makes this process the one ladder serving the database (see
        :mod:`.lease`); raises :class:`~.errors.LeaseHeldError` if another process holds it
        after ``wait_s``. Release it with ``Lease.release()`` (or let the process end)."""
        return lease.acquire(self._backend, self._url, self.url, wait_s)

    def migrate(self) -> None:
        """Brings the schema to the newest revision (``alembic upgrade head``); a no-op when it
        is there already, so the service runs it at every start."""
        config = alembic_config()
        with (_ALEMBIC_LOCK, self._locked(), self._engine.connect() as connection,
              self._foreign_keys_off(connection)):
            connection.execution_options(**{_WRITE_OPTION: True})
            with connection.begin():
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                self._check_foreign_keys(connection)

    @contextmanager
    def _foreign_keys_off(self, connection: Connection) -> Iterator[None]:
        """SQLite's way to change a table others refer to (its "generalized ALTER TABLE
        procedure", which Alembic's batch mode follows): foreign keys off, outside any
        transaction (the pragma is a no-op inside one), while the table is rebuilt, then
        checked (:meth:`_check_foreign_keys`) before the commit, and on again."""
        if self._backend != "sqlite":
            yield
            return
        raw = connection.connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA foreign_keys=OFF")
        try:
            yield
        finally:
            raw.execute("PRAGMA foreign_keys=ON")

    def _check_foreign_keys(self, connection: Connection) -> None:
        if self._backend != "sqlite":
            return
        broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"the migration broke {len(broken)} foreign keys, e.g. "
                               f"{tuple(broken[0])}: rolled back")

    def _locked(self) -> AbstractContextManager[object]:
        return self._memory_lock if self._memory_lock is not None else nullcontext()

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Session]:
        """One session in one transaction, committed on success and rolled back on error.

        Reads on PostgreSQL run at REPEATABLE READ, so that a leaderboard or profile built from
        several queries sees one moment; read-only transactions never fail to serialize.
        """
        with self._locked(), self._engine.connect() as connection:
            if write:
                connection.execution_options(**{_WRITE_OPTION: True})
            elif self._backend == "postgresql":
                connection.execution_options(isolation_level="REPEATABLE READ")
            with Session(bind=connection, expire_on_commit=False) as session, session.begin():
                yield session
