"""Where the referee keeps its matches' records: written as each match ends, read back by id.

A record is written atomically to the records directory, its JSON made on the event loop and
only the file's system calls on one writer thread for the whole process (`record_writer`). It
is read back from memory while the match's summary keeps it there (`MatchBook`), else from the
directory, also for matches of an earlier run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from pathlib import Path

from ..record import MatchRecord, RecordError, load_record, record_bytes, write_record_bytes
from .book import KnownMatch, is_record_id
from .events import MatchStatus
from .match import MatchRunner

log = logging.getLogger("scout_arena.referee")


@functools.cache
def record_writer() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that writes record files, for every referee of the process. One, not
    asyncio's pool: a thread that wakes needs the interpreter lock back from the event loop,
    and on a busy machine every hand-over costs the loop more than the write itself. With
    asyncio's pool (up to 6 threads here) the referee made 10,500-10,800 decisions/s at 100
    matches (bench/referee.py --quick) against 11,700-12,000 with no thread at all; with one
    thread and the JSON made on the loop, p99 was 13.2 and 15.1 ms in two runs, against 17.3
    and 17.5 with the pool. Records are written in the order their matches ended."""
    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="scout-records")


class RecordStore:
    """The records directory of one referee (None: records stay in memory only)."""

    def __init__(self, records_dir: Path | None) -> None:
        self.records_dir = records_dir

    async def store(self, match: MatchRunner) -> None:
        """Write the record atomically off the event loop; a reader never sees half of one.
        Its JSON is made here (the interpreter's work, held against the loop wherever it runs)
        and only the file's system calls go to the writer thread (`record_writer`)."""
        if self.records_dir is None or match.record is None:
            return
        path = self.records_dir / f"{match.match_id}.json"
        data = record_bytes(match.record)
        await asyncio.get_running_loop().run_in_executor(record_writer(), write_record_bytes,
                                                         data, path)

    async def find(self, match_id: str, known: KnownMatch | None) -> MatchRecord | None:
        """The record of a match that has ended: from memory while ``known`` (the match as
        the referee still knows it) holds it, else from the records directory; None if
        neither has it."""
        if known is not None and known.record is not None and \
                known.status is not MatchStatus.RUNNING:
            return known.record
        if self.records_dir is None or not is_record_id(match_id):
            return None
        path = self.records_dir / f"{match_id}.json"
        try:
            return await asyncio.to_thread(load_record, path)
        except FileNotFoundError:
            return None
        except (OSError, RecordError, ValueError) as exc:
            log.warning("cannot read the record %s: %s", path, exc)
            return None
