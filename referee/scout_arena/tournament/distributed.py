"""Tournaments on many nodes: the schedule cut into chunks, each played by a worker with a
referee on its own 127.0.0.1 and its own bot programs, the finished records sent back to the
driver (which writes them, and the summary and standings, as a local run does).

Two kinds of nodes:

- ``nodes=N``: N worker processes on this machine (``python -m scout_arena.tournament.worker``),
  each starting the bots once and playing chunk after chunk as it asks for the next (before
  the last matches of its chunk end: no seat idles at a chunk's end). Chunks are cut as nodes
  ask, smaller as the schedule runs out (`guided_chunk_size`), so that no node is left playing
  a long last chunk alone while the others idle. A worker that dies gives its chunks'
  unfinished matches back to the queue for the others.
- ``ray_address``: a Ray cluster (`onray.py`). Each chunk is a Ray task (one CPU, spread over
  the nodes) that starts a referee and every bot on the node that runs it, plays the chunk and
  returns its finished records as JSON. A task whose worker or node dies is run again
  elsewhere (``max_retries``); its matches finished before that are played again there, and
  the driver keeps one record per tournament key (and lists the retry as a fault).

What a Ray node needs: scout-arena (with ``[bots]`` for the bundled bots) installed in the
Python that runs Ray's workers, and every bot command runnable there. The task runs in the
driver's current directory when the node has it (a node on this machine, or a checkout at the
same path); ``working_dir`` instead ships a local folder to every node through Ray's runtime
environment, and the bot commands run inside the unpacked copy.

Within a node, ``config.concurrency`` matches run at once, so the whole cluster runs up to
nodes (or Ray CPUs) x concurrency. A bot that forfeits 3 matches in a row is seated as absent
for the rest of that node's chunk (``--nodes``: for the rest of that node's run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import signal
import tempfile
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..record import (
    JSON,
    MatchRecord,
    record_bytes,
    record_from_json,
    write_record_bytes,
)
from ..workerspawn import Workers, node_names, start_worker
from .config import ScheduledMatch, TournamentConfig
from .worker import RECORD_PREFIX, items_to_json

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Delivers a record, with its file's bytes when they came as they are to be written.
Deliver = Callable[[MatchRecord, bytes | None], None]

#: bot name -> (status, notes), what one node says of each bot.
BotsReport = Mapping[str, tuple[str, Sequence[str]]]
#: The most matches in one chunk: what a node that dies can lose, and play again.
MAX_CHUNK = 50
STOP_GRACE_S = 15.0


@dataclass(frozen=True, slots=True)
class NodeFault:
    """Something a node did that cost matches, for the summary (summary.json ``faults``):
    ``kind`` is "node_died" (a ``--nodes`` worker died in a chunk; its unfinished matches went
    to the other nodes), "node_exited" (a worker ended with a non-zero status) or
    "ray_chunk_failed" (a Ray task failed beyond its retries; its matches were not played) or
    "ray_chunk_retried" (Ray ran a task again after its worker or node died, and that attempt
    finished: its matches were played again from the start of the chunk)."""

    kind: str
    node: str
    detail: str
    chunk: int | None = None
    matches: int = 0
    """The matches it cost: given back to the queue, played again, or left unplayed."""
    attempts: int | None = None
    """Ray: how many times the chunk's task was started (None: not known, or not Ray)."""

    def to_json(self) -> JSON:
        return {"kind": self.kind, "node": self.node, "chunk": self.chunk,
                "matches": self.matches, "attempts": self.attempts, "detail": self.detail}


class DistributedError(RuntimeError):
    """Matches that no node could play (they stay unfinished: resume the tournament later)."""


def default_chunk_size(matches: int, slots: int, concurrency: int) -> int:
    """About two chunks per slot (a node, or a Ray CPU) so that the last ones balance out; not
    fewer matches than a node runs at once, nor more than `MAX_CHUNK`."""
    per_slot = math.ceil(matches / (2 * max(1, slots)))
    return max(1, min(MAX_CHUNK, max(concurrency, per_slot)))


def guided_chunk_size(left: int, nodes: int, concurrency: int) -> int:
    """The next chunk of a ``--nodes`` run: half a node's share of the matches ``left``
    (guided self-scheduling: big chunks first, then smaller ones as the end nears), not fewer
    than a node runs at once, nor more than `MAX_CHUNK`. The last chunks are the size of a
    node's concurrency, so all nodes finish within about one match of each other."""
    return max(1, min(MAX_CHUNK, max(concurrency, math.ceil(left / (2 * max(1, nodes))))))


def chunked(items: Sequence[ScheduledMatch], size: int) -> list[list[ScheduledMatch]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


async def play_distributed(config: TournamentConfig, items: Sequence[ScheduledMatch], *,
                           nodes: int | None = None, ray_address: str | None = None,
                           on_record: Callable[[MatchRecord], object],
                           on_bots: Callable[[str, BotsReport], None] | None = None,
                           logs_dir: Path | None = None, chunk_size: int | None = None,
                           working_dir: Path | None = None, stop: asyncio.Event | None = None,
                           max_retries: int = 3,
                           on_fault: Callable[[NodeFault], None] | None = None,
                           records_dir: Path | None = None,
                           workers: Workers | None = None) -> None:
    """Play ``items`` (scheduled matches of ``config``) on workers; give each finished
    record to ``on_record``, on this event loop, as it comes back.

    Exactly one of ``nodes`` (that many worker processes on this machine) and ``ray_address``
    (a Ray cluster: "auto" for the one ``RAY_ADDRESS`` or ``ray start`` on this machine names,
    or HOST:PORT of its head) must be given. If Ray is already initialised in this process it
    is used as it is (and left so); otherwise it is initialised and shut down here.

    - ``on_record(record)``: once per tournament key of ``items`` (a match played again after a
      node died is not given twice), finished records only (``record.finished``), in the order
      they arrive (not schedule order). The record has the referee's ``match_id``; writing it
      is the caller's business. If it returns True, the run stops early, as with ``stop``
      (the caller has what it needs; no error for the matches left).
    - ``on_bots(node name, {bot: (status, notes)})``: what a node found of each bot (it did not
      start there, crashed, never connected, ...); called after each chunk, several times per
      node.
    - ``logs_dir``: the bots' stderr: ``--nodes`` writes ``logs_dir/<node>/<bot>.stderr.log``;
      Ray appends each task's last 16 KiB to ``logs_dir/<bot>.stderr.log``. None: not kept.
    - ``chunk_size``: matches per chunk (default: ``nodes``, `guided_chunk_size`; Ray,
      `default_chunk_size`).
    - ``working_dir``: Ray only, a local folder shipped to every node as the tasks' working
      directory (default: the tasks run in this process's current directory, where it exists).
    - ``stop``: set it to stop early: running matches are aborted, chunks not yet finished are
      dropped (Ray: cancelled). Finished records already given stay given.
    - ``max_retries``: Ray only, how often a chunk whose worker or node died is run again.
    - ``on_fault(fault)``: told of each `NodeFault` as it happens.
    - ``records_dir``: each record given to ``on_record`` is first written there, as
      ``<match_id>.json``, with the bytes a node sent (not decoded and encoded again: the
      driver of many nodes must not become their bottleneck).
    - ``workers``: ``--nodes`` only, worker processes already started
      (`scout_arena.workerspawn.start_workers`); each node takes its own out of it, and
      starts one where there is none.

    Raises `DistributedError` (after everything else was played) when some matches could not be
    played: every local worker died, or a Ray task failed beyond its retries."""
    if (nodes is None) == (ray_address is None):
        raise ValueError("give either nodes or ray_address")
    if nodes is not None and nodes < 1:
        raise ValueError("nodes is at least 1")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError("chunk_size is at least 1")
    wanted = {m.key for m in items}
    delivered: set[str] = set()
    halt = asyncio.Event()  # the caller's stop, or on_record's True

    def deliver(record: MatchRecord, data: bytes | None) -> None:
        key = record.tournament_key
        if record.finished and key in wanted and key not in delivered:
            delivered.add(key)
            if records_dir is not None:
                write_record_bytes(record_bytes(record) if data is None else data,
                                   records_dir / f"{record.match_id}.json")
            if on_record(record) is True:
                halt.set()

    if not items:
        return
    watch = asyncio.ensure_future(stop.wait()) if stop is not None else None
    if watch is not None:
        watch.add_done_callback(lambda _: halt.set())
    try:
        if nodes is not None:
            problems = await _LocalWorkers(config, items, chunk_size, nodes, deliver, on_bots,
                                           logs_dir, halt, on_fault, workers).run()
        else:
            assert ray_address is not None
            from .onray import play_on_ray

            problems = await play_on_ray(config, items, ray_address, deliver, on_bots,
                                          logs_dir, chunk_size, working_dir, halt, max_retries,
                                          on_fault)
    finally:
        if watch is not None:
            watch.cancel()
    missing = wanted - delivered
    if missing and not halt.is_set():
        raise DistributedError(f"{len(missing)} of {len(wanted)} matches were not played: "
                               + "; ".join([p.detail for p in problems]
                                           or ["no node played them"]))


def _report_from_json(data: Mapping[str, Sequence[Iterable[object]]]
                      ) -> dict[str, tuple[str, list[str]]]:
    return {name: (str(status), [str(n) for n in notes])
            for name, (status, notes) in data.items()}


# ----- local worker processes ---------------------------------------------------------------


class _LocalWorkers:
    """``nodes`` worker processes on this machine taking chunks from one queue: chunks given
    back by a node that died first, then new ones cut from the matches left."""

    def __init__(self, config: TournamentConfig, items: Sequence[ScheduledMatch],
                 chunk_size: int | None, count: int, deliver: Deliver,
                 on_bots: Callable[[str, BotsReport], None] | None, logs_dir: Path | None,
                 stop: asyncio.Event, on_fault: Callable[[NodeFault], None] | None = None,
                 workers: Workers | None = None) -> None:
        self.config = config
        self.ahead: Workers = {} if workers is None else workers
        self.on_fault = on_fault
        self.queue: deque[tuple[int, list[ScheduledMatch]]] = deque()
        self.left: deque[ScheduledMatch] = deque(items)
        self.chunk_size = chunk_size
        self.chunks = 0
        self.count = count
        self.deliver = deliver
        self.on_bots = on_bots
        self.logs_dir = logs_dir
        self.stop = stop
        self.busy = 0
        self.changed = asyncio.Event()
        self.problems: list[NodeFault] = []

    def _fault(self, fault: NodeFault) -> None:
        log.warning(fault.detail)
        self.problems.append(fault)
        if self.on_fault is not None:
            self.on_fault(fault)

    async def run(self) -> list[NodeFault]:
        with contextlib.ExitStack() as stack:
            logs = self.logs_dir
            if logs is None:
                logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scout-")))
            await asyncio.gather(*(self._worker(name, logs / name)
                                   for name in node_names(self.count)))
        return self.problems

    def _has_work(self) -> bool:
        return bool(self.queue or self.left)

    def _take(self) -> tuple[int, list[ScheduledMatch]]:
        if self.queue:
            return self.queue.popleft()
        size = self.chunk_size or guided_chunk_size(len(self.left), self.count,
                                                    self.config.concurrency)
        chunk = [self.left.popleft() for _ in range(min(size, len(self.left)))]
        self.chunks += 1
        return self.chunks - 1, chunk

    async def _next_chunk(self) -> tuple[int, list[ScheduledMatch]] | None:
        """The next chunk; while the queue is empty but another node is busy (and may give
        its chunk back), wait. None: nothing left, or stop."""
        while not self.stop.is_set():
            if self._has_work():
                return self._take()
            if self.busy == 0:
                return None
            self.changed.clear()
            await _first(self.changed.wait(), self.stop.wait())
        return None

    def _handle(self, name: str, line: bytes, returned: set[str]) -> JSON:
        """Take what a node said (a record, a bots report); the message, for the rest."""
        message: JSON = json.loads(line)
        if "record" in message:
            record = record_from_json(message["record"])
            if record.tournament_key is not None:
                returned.add(record.tournament_key)
            data = line[len(RECORD_PREFIX):].rstrip()
            self.deliver(record, data[:-1] + b"\n" if line.startswith(RECORD_PREFIX) else None)
        if "bots" in message and self.on_bots is not None:
            self.on_bots(name, _report_from_json(message["bots"]))
        return message

    async def _worker(self, name: str, logs: Path) -> None:
        """One node: its first chunk, then the next whenever it asks for more (while it plays
        the last matches of the one before) or has none left."""
        process = self.ahead.pop(name, None) or await start_worker(name)
        assert process.stdin is not None and process.stdout is not None
        held: dict[int, list[ScheduledMatch]] = {}
        """Chunks sent to this node and not done."""
        returned: set[str] = set()
        alive = await _send(process, {"config": self.config.to_json(), "logs": str(logs)})

        async def give(chunk: tuple[int, list[ScheduledMatch]]) -> bool:
            held[chunk[0]] = chunk[1]
            self.busy += 1
            return await _send(process, {"chunk": chunk[0], "items": items_to_json(chunk[1])})

        try:
            while alive:
                if not held:
                    chunk = await self._next_chunk()
                    if chunk is None:
                        break
                    alive = await give(chunk)
                    continue
                line = await _first(process.stdout.readline(), self.stop.wait())
                if not isinstance(line, bytes):
                    break
                if not line:
                    alive = False
                    break
                message = self._handle(name, line, returned)
                if "more" in message and self._has_work() and not self.stop.is_set():
                    alive = await give(self._take())
                elif "done" in message and held.pop(int(message["done"]), None) is not None:
                    self.busy -= 1
                    self.changed.set()
        finally:
            await self._shut(name, process, returned, logs)
            for index, items in held.items():
                self._give_back(name, process, (index, items), returned)

    def _give_back(self, name: str, process: asyncio.subprocess.Process,
                   chunk: tuple[int, list[ScheduledMatch]], returned: set[str]) -> None:
        """A chunk its node did not finish: the rest of it goes back to the queue."""
        self.busy -= 1
        rest = [m for m in chunk[1] if m.key not in returned]
        if rest and not self.stop.is_set():
            self.queue.appendleft((chunk[0], rest))
            self._fault(NodeFault(
                "node_died", name, f"{name} died (exit status {process.returncode}) in chunk "
                f"{chunk[0]}; its {len(rest)} unfinished matches go to the other nodes",
                chunk[0], len(rest)))
        self.changed.set()

    async def _shut(self, name: str, process: asyncio.subprocess.Process,
                    returned: set[str], logs: Path) -> None:
        """End the node: end of input (SIGTERM on stop); read what it still says."""
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(OSError):
            process.stdin.close()
        if self.stop.is_set() and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_GRACE_S):
                while line := await process.stdout.readline():
                    self._handle(name, line, returned)
                await process.wait()
        except (TimeoutError, ValueError):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if process.returncode != 0 and not self.stop.is_set():
            log_file = logs / "node.stderr.log"  # the worker's, once it had its first message
            where = f"; see {log_file}" if self.logs_dir is not None and log_file.exists() \
                else "; see this command's stderr"
            self._fault(NodeFault("node_exited", name,
                                  f"{name} exited with status {process.returncode}{where}"))


async def _send(process: asyncio.subprocess.Process, message: JSON) -> bool:
    assert process.stdin is not None
    try:
        process.stdin.write((json.dumps(message) + "\n").encode())
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


async def _first(*aws: Awaitable[T]) -> T:
    """The result of whichever awaitable is done first (the others are cancelled)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    return next(t for t in tasks if t in done).result()
