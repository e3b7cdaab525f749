"""Alembic environment of the ladder database.

``Repository.migrate()`` hands over its own connection (``config.attributes["connection"]``),
already inside a transaction, so the migration runs on the engine the service uses (with its
SQLite pragmas) and commits or rolls back as a whole. Without one (Alembic's command line, with
``sqlalchemy.url`` set by ``scout_ladder.repository.alembic_config(url)``) it opens its own.
"""

from __future__ import annotations

from alembic import context
from scout_ladder.models import Base
from sqlalchemy import Connection, create_engine, pool, text

# Two ladder processes starting at once against one PostgreSQL database must not both
# create the tables: the first takes this transaction-scoped advisory lock, the second waits
# and then finds the schema at head.
MIGRATION_LOCK_KEY = 0x5C0_7A7E4A


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


def _run_online() -> None:
    connection = context.config.attributes.get("connection")
    if isinstance(connection, Connection):
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url: use alembic_config(url)")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as own_connection:
            _run(own_connection)
    finally:
        engine.dispose()


def _run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=Base.metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline()
else:
    _run_online()
