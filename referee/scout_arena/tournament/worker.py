"""A worker of a ``--nodes`` run: ``python -m scout_arena.tournament.worker NAME [LOGS_DIR]``.

It starts one referee on 127.0.0.1 and every bot program once (`venue.Venue`), then plays the
chunks of the schedule the driver sends, one after another, with the same referee and bots.
The driver speaks JSON lines (the worker's stdout carries nothing else; anything printed goes to
stderr):

- driver -> worker, on stdin: ``{"config": TournamentConfig JSON, "logs": LOGS_DIR}`` first
  (``logs``, if given, replaces the command line's; the worker's stderr goes to
  ``LOGS_DIR/node.stderr.log`` from then on, and the bots' to ``LOGS_DIR/BOT.stderr.log``), then
  ``{"chunk": ID, "items": [[key, [seat names], seed], ...]}`` for each chunk. End of input (or
  SIGTERM/SIGINT) stops the worker: a match still running is aborted and not reported.
- worker -> driver: ``{"ready": true, "bots": REPORT}`` once the bots are connected,
  ``{"record": record JSON}`` as each match of the chunk finishes, ``{"done": ID, "bots":
  REPORT}`` after the chunk's last one, and ``{"bots": REPORT}`` after the bots have stopped.
  REPORT: ``{bot name: [status, [notes]]}``. ``{"more": true}`` when fewer matches wait than
  it plays at once: the driver may send the next chunk then, so that no seat idles while a
  chunk's last matches end and the next one makes its way (chunks then overlap).

Bots are started so that they die with the worker (a killed worker leaves no bot behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..record import JSON, MatchRecord, record_bytes
from .config import ScheduledMatch, TournamentConfig
from .venue import BotProcess, Feed, Venue, new_bots

#: How a record message starts; the record file's bytes follow it as they are (the driver
#: writes them without decoding and encoding them again), then ``}``.
RECORD_PREFIX = b'{"record":'


def bots_report(bots: Mapping[str, BotProcess]) -> JSON:
    """Status and notes of every bot, as the distributed driver takes them."""
    return {name: [bot.status, list(bot.notes)] for name, bot in bots.items()}


ItemsJSON = Sequence[Sequence[Any]]  # Any: decoded [key, seats, seed] lists; str()/int() read them


def items_to_json(items: Sequence[ScheduledMatch]) -> list[list[object]]:
    return [[m.key, list(m.seats), m.seed] for m in items]


def items_from_json(data: ItemsJSON) -> list[ScheduledMatch]:
    return [ScheduledMatch(str(key), tuple(str(s) for s in seats), int(seed))
            for key, seats, seed in data]


class _Output:
    """The protocol channel: the original stdout, while fd 1 itself now points at stderr."""

    def __init__(self) -> None:
        self._fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def send(self, message: JSON) -> None:
        self.write((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def send_record(self, record: MatchRecord) -> None:
        self.write(RECORD_PREFIX + record_bytes(record).rstrip() + b"}\n")

    def write(self, data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):
            while data:
                data = data[os.write(self._fd, data):]


async def _stdin_reader() -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=1 << 24)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _line_or_stop(reader: asyncio.StreamReader, stop: asyncio.Event) -> bytes:
    line = asyncio.ensure_future(reader.readline())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({line, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not line.done():
        line.cancel()
        return b""
    return line.result()


def _log_to(path: Path) -> None:
    """From now on, this process's stderr (and its print()s) go to ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)


async def serve(logs_dir: Path | None) -> None:
    out = _Output()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    reader = await _stdin_reader()
    first = await _line_or_stop(reader, stop)
    if not first:
        return
    opening = json.loads(first)
    config = TournamentConfig.from_json(opening["config"])
    named = opening.get("logs")
    if named is not None:
        logs_dir = Path(str(named))
    if logs_dir is None:
        raise SystemExit("no logs folder: give it on the command line or in the first message")
    logs_dir.mkdir(parents=True, exist_ok=True)
    if named is not None:
        _log_to(logs_dir / "node.stderr.log")
    bots = new_bots(config)
    venue = Venue(config, bots, logs_dir, None, die_with_parent=True)
    await venue.start()
    feed = Feed(on_low=lambda: out.send({"more": True}))
    left: dict[int, int] = {}
    """Chunk id -> its matches not ended yet."""
    chunk_of: dict[str, int] = {}

    def ended(item: ScheduledMatch) -> None:
        chunk = chunk_of.pop(item.key, None)
        if chunk is not None:
            left[chunk] -= 1
            if not left[chunk]:
                del left[chunk]
                out.send({"done": chunk, "bots": bots_report(bots)})

    async def take_chunks() -> None:
        while line := await _line_or_stop(reader, stop):
            message = json.loads(line)
            items = items_from_json(message["items"])
            chunk = int(message["chunk"])
            for item in items:
                chunk_of[item.key] = chunk
            left[chunk] = len(items)
            if not items:
                del left[chunk]
                out.send({"done": chunk, "bots": bots_report(bots)})
            venue.feed(feed, items)
        venue.close_feed(feed)

    reader_task: asyncio.Task[None] | None = None
    try:
        await venue.connect(stop)
        out.send({"ready": True, "bots": bots_report(bots)})
        reader_task = asyncio.create_task(take_chunks())
        await venue.play_feed(feed, stop, out.send_record, ended)
    finally:
        if reader_task is not None:
            reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader_task
        await venue.close()
        out.send({"bots": bots_report(bots)})


def main() -> None:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    asyncio.run(serve(Path(sys.argv[2]) if len(sys.argv) == 3 else None))


if __name__ == "__main__":
    main()
