"""The ladder's storage folder: hosted bots' uploads and data folders, beside the database.

The database stays the source of truth of which versions exist: an upload is written (to a
temporary name, then renamed) inside the transaction that adds its version's row, and removed
when that transaction fails, so a file without a row is at worst a leftover that the next
upload of that number overwrites. Layout, by bot id (names are the bots' own choice, ids are
ours)::

    <storage>/uploads/<bot id>/<version>.tar.gz   the normalized upload (a .tar.gz)
    <storage>/data/<bot id>/                      the bot's persistent data folder

The default folder (:func:`default_storage`) is ``<database file>-storage`` beside a SQLite
file, and ``ladder-storage`` in the working directory for PostgreSQL or an in-memory SQLite.
Nothing is created until something is written.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL

MiB = 1024 * 1024


@dataclass(frozen=True)
class OwnerLimits:
    """What a public ladder allows each owner; each refusal is its own error
    (:class:`~.errors.LimitError`). The admin is not limited."""

    bots_per_owner: int = 10
    """Unretired bots per owner account."""
    submissions_per_hour: int = 10
    """Uploads per owner in any hour (rejected ones count: each cost a validation)."""
    max_upload_bytes: int = 50 * MiB
    """Largest upload, as sent (AI Arena's 50 MB)."""
    runs_kept_per_bot: int = 100
    """Hosted run outputs kept per bot (the newest)."""

    def __post_init__(self) -> None:
        for name in ("bots_per_owner", "submissions_per_hour", "max_upload_bytes",
                     "runs_kept_per_bot"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")


OUTPUT_LIMIT_BYTES = 64 * 1024
"""A run's output tail and a version's validation output are kept to this many bytes (the
end of them: the last lines say why it ended)."""


def tail_text(text: str, limit: int = OUTPUT_LIMIT_BYTES) -> str:
    """The last ``limit`` UTF-8 bytes of ``text`` (cut on a character boundary), marked when
    cut; NULs (which PostgreSQL refuses in text) become U+FFFD."""
    text = text.replace("\x00", "\ufffd")
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    marker = f"[... {len(data) - limit} bytes cut ...]\n"
    kept = data[len(data) - limit + len(marker.encode()):]
    return marker + kept.decode("utf-8", errors="ignore")


def default_storage(url: URL) -> Path:
    """The storage folder a ladder uses when none is given (see the module docstring)."""
    database = url.database if url.get_backend_name() == "sqlite" else None
    if database and database != ":memory:":
        path = Path(database)
        return path.with_name(path.name + "-storage")
    return Path("ladder-storage")


class FileStore:
    """Paths and atomic writes under one storage folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def upload_path(self, bot_id: int, version: int) -> Path:
        return self.root / "uploads" / str(bot_id) / f"{version}.tar.gz"

    def data_dir(self, bot_id: int) -> Path:
        return self.root / "data" / str(bot_id)

    def write_upload(self, bot_id: int, version: int, data: bytes) -> Path:
        """Writes an upload under its final name atomically (a reader never sees half)."""
        path = self.upload_path(bot_id, version)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{version}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return path
