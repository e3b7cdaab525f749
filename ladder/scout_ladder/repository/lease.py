"""The lease: at most one ladder process serves a database.

Two ladders on one database would each void the other's matches at start and both write
ratings. So ``ladder serve`` takes a lease first and refuses to start without it:

* **PostgreSQL:** a session advisory lock, held on a connection of its own (outside the pool,
  in autocommit, so no transaction stays open) for the life of the process. The key is the
  schema the ladder's tables live in, so ladders on two schemas of one database do not block
  each other. When the process dies, however it dies, its connection closes and PostgreSQL
  releases the lock; the session asks the server for TCP keepalives so that even a machine
  that vanished without closing its socket gives the lease up within about a minute.
* **SQLite:** ``flock`` on a lock file next to the database (``ladder.db.lock``). The kernel
  releases it when the process exits or is killed. The file stays (removing a lock file races
  with a process that has just opened it); it holds the last holder's pid, for the message.
* **In-memory SQLite** is private to its process: nothing to lease.

A stale lease of a killed ladder never blocks a restart: there is no lease row to clean up,
only a lock the operating system or the server drops with the process's connection or file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from scout_arena.text import brief
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from .errors import LeaseHeldError, LeaseLostError

_LOCK_CLASS = 0x5C0_7AD
"""The first key of the two-int advisory lock: the ladder's own lock space (the second key is
a hash of the schema)."""


def _holder_text() -> str:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return f"scout-ladder pid {os.getpid()} on {socket.gethostname()} since {started}"


class Lease:
    """Held until :meth:`release` (or the process's end). :meth:`check` raises
    :class:`LeaseLostError` if it is no longer held."""

    description = "no lease (a private in-memory database)"

    def check(self) -> None:
        """Raises LeaseLostError when the lease is gone."""

    def release(self) -> None:
        """Gives the lease up; idempotent."""


class FileLease(Lease):
    """``flock`` on ``path``; the kernel drops it with the process."""

    def __init__(self, path: Path, database: str) -> None:
        self.path = path
        self.description = f"lock file {path}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise LeaseHeldError(
                f"another ladder is serving {database} ({holder or 'holder unknown'}; lock "
                f"file {path}); stop it first, two ladders on one database corrupt it"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, (_holder_text() + "\n").encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class PostgresLease(Lease):
    """A session advisory lock on a dedicated autocommit connection."""

    def __init__(self, url: URL, shown_url: str) -> None:
        self._engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            self._connection: Connection | None = self._engine.connect()
            self._acquire(self._connection, shown_url)
        except BaseException:
            self.release()
            raise

    def _acquire(self, connection: Connection, shown_url: str) -> None:
        for name, value in (("application_name", _holder_text()[:63]),
                            # The server notices a vanished client within about a minute.
                            ("tcp_keepalives_idle", "15"), ("tcp_keepalives_interval", "5"),
                            ("tcp_keepalives_count", "6")):
            connection.execute(text("SELECT set_config(:name, :value, false)"),
                               {"name": name, "value": value})
        schema = connection.execute(
            text("SELECT coalesce(current_schema(), current_setting('search_path'))")).scalar_one()
        key = connection.execute(text("SELECT hashtext(:schema)"), {"schema": schema}).scalar_one()
        self.description = f"advisory lock ({_LOCK_CLASS}, {key}) for schema {schema}"
        got = connection.execute(text("SELECT pg_try_advisory_lock(:c, :k)"),
                                 {"c": _LOCK_CLASS, "k": key}).scalar_one()
        if got:
            return
        holder = connection.execute(text(
            "SELECT a.application_name, a.client_addr, a.pid FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 "
            "AND l.classid::bigint = :c AND l.objid::bigint = :u "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
            {"c": _LOCK_CLASS, "u": key & 0xFFFFFFFF}).first()
        who = "holder unknown" if holder is None else (
            f"{holder[0] or 'a client'} from {holder[1] or 'a local socket'}, "
            f"server pid {holder[2]}")
        raise LeaseHeldError(
            f"another ladder is serving {shown_url} schema {schema} ({who}); stop it first, "
            "two ladders on one database corrupt it")

    def check(self) -> None:
        connection = self._connection
        if connection is None:
            raise LeaseLostError("the lease was released")
        try:
            connection.exec_driver_sql("SELECT 1").scalar_one()
        except Exception as exc:
            raise LeaseLostError(
                f"the connection holding the ladder's lease on the database died ({brief(exc)})"
            ) from exc

    def release(self) -> None:
        connection, self._connection = getattr(self, "_connection", None), None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()
        self._engine.dispose()


def acquire(backend: str, url: URL, shown_url: str, wait_s: float) -> Lease:
    """The lease of the database at ``url``; waits up to ``wait_s`` for a holder that is going
    away (a ladder being restarted), then raises LeaseHeldError."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if backend == "postgresql":
                return PostgresLease(url, shown_url)
            database = url.database
            if database in (None, "", ":memory:"):
                return Lease()
            return FileLease(Path(f"{database}.lock"), shown_url)
        except LeaseHeldError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
