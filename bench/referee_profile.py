"""The referee of bench/referee.py --profile: run in a child process under cProfile, and
its profile read back."""

from __future__ import annotations

import asyncio
import pstats
import sys
from pathlib import Path
from typing import Any, cast

from referee_setup import ADMIN_TOKEN, BOT_NAMES, DECISION_MS, TIME_BANK_MS
from scout_arena.server.convert import ProtobufWire
from trivial_bot import (
    JSON,
)

# ----- the referee under cProfile (child process mode) ---------------------------------------


def profiled_referee_main(out: Path, records: Path, port: int) -> int:
    """The referee as ``scout-arena referee serve`` runs it, in this process, with cProfile
    switched on and off by ``on``/``off`` lines on stdin (``off`` dumps the stats to ``out``
    and prints ``D``)."""
    import cProfile
    import logging

    from scout_arena.server import Referee, RefereeServer, serve_forever
    from scout_rules.protocol import TimeControl

    logging.basicConfig(level=logging.WARNING)
    records.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()

    async def main() -> None:
        referee = Referee(
            {name: f"tok-{name}" for name in BOT_NAMES},
            wire=ProtobufWire(),
            records_dir=records,
            default_time_control=TimeControl(DECISION_MS, TIME_BANK_MS),
        )
        server = RefereeServer(referee, host="127.0.0.1", port=port, admin_token=ADMIN_TOKEN)
        ready = asyncio.Event()
        task = asyncio.create_task(serve_forever(server, 0.0, ready))
        await ready.wait()
        print(f"referee listening on {server.address}", flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while not task.done():
            line = (await reader.readline()).decode().strip()
            if line == "on":
                profiler.enable()
            elif line == "off":
                profiler.disable()
                profiler.dump_stats(str(out))
                print("D", flush=True)
            elif not line:
                break
        await task

    asyncio.run(main())
    return 0


def _where(key: tuple[str, int, str]) -> str:
    """``function file.py:line`` (just the function for built-ins)."""
    path, line, func = key
    if path == "~":
        return func
    folder, _, name = path.rpartition("/")
    package = folder.rpartition("/")[2]
    if package in ("server", "scout_rules", "scout_arena", "asyncio", "grpc", "aio"):
        name = f"{package}/{name}"
    return f"{func} {name}:{line}"


def read_profile(path: Path, decisions: int, top: int = 30) -> JSON:
    stats = pstats.Stats(str(path))
    raw = cast(dict[tuple[str, int, str], tuple[int, int, float, float, Any]], stats.stats)  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    rows: list[JSON] = [
        {
            "function": _where(k),
            "ncalls": v[1],
            "tottime_s": v[2],
            "cumtime_s": v[3],
            "tottime_share": v[2] / total if total else 0.0,
            "tottime_us_per_decision": v[2] / max(1, decisions) * 1e6,
            "cumtime_us_per_decision": v[3] / max(1, decisions) * 1e6,
        }
        for k, v in raw.items()
    ]
    by_self = sorted(rows, key=lambda r: -r["tottime_s"])[:top]
    ours = [r for path_row, r in zip(raw, rows, strict=True) if "scout_arena" in path_row[0]]
    by_cum = sorted(ours, key=lambda r: -r["cumtime_s"])[:top]
    return {
        "total_profiled_s": total,
        "decisions": decisions,
        "top_self": by_self,
        "top_cumulative_scout_arena": by_cum,
    }
