"""Starting the worker processes of ``tournament --nodes`` (`scout_arena.tournament.worker`).

A module of its own, light to import, so that the tournament command starts its workers before
it imports the tournament package: each worker's start-up (a Python and a referee to import)
then runs beside the driver's instead of after it. A worker started here writes to this
process's stderr until its first message names its logs folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

WORKER_MODULE = "scout_arena.tournament.worker"
#: The longest line a worker may send (a record with every move of a long match).
LINE_LIMIT = 1 << 24
UNUSED_STOP_S = 10.0

Workers = dict[str, asyncio.subprocess.Process]
"""Worker processes started ahead, by node name; whoever plays on one takes it out."""


def node_names(count: int) -> list[str]:
    return [f"node-{i + 1}" for i in range(count)]


async def start_worker(name: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", WORKER_MODULE, name, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, start_new_session=True, limit=LINE_LIMIT)


async def start_workers(count: int) -> Workers:
    return {name: await start_worker(name) for name in node_names(count)}


async def stop_unused(workers: Workers) -> None:
    """End the workers nobody took: end of input, which a worker waiting for its first
    message answers by exiting."""
    for process in workers.values():
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            process.stdin.close()
    for process in workers.values():
        try:
            await asyncio.wait_for(process.wait(), UNUSED_STOP_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    workers.clear()
