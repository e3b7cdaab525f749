"""`scout-arena ladder ...`: serve the ladder, register bots, print standings and history."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from typing import Any

DEFAULT_DATABASE = "sqlite:///ladder.db"


def _repo(args: argparse.Namespace) -> Any:
    from .repository import Repository

    repo = Repository(args.database)
    repo.migrate()
    return repo


def _console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=140)


def cmd_serve(args: argparse.Namespace) -> int:
    from scout_arena.server import TimeControl

    from .matchmaker import MatchmakerConfig
    from .service import Ladder, LadderConfig

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sizes = tuple(int(x) for x in args.table_sizes.split(","))
    if not sizes or not all(2 <= s <= 5 for s in sizes):
        raise SystemExit("--table-sizes takes sizes from 2 to 5, e.g. 4 or 2,3,4")
    config = LadderConfig(
        host=args.host, port=args.port, admin_token=args.admin_token,
        matchmaker=MatchmakerConfig(table_sizes=sizes, allow_same_owner=args.allow_same_owner),
        time_control=TimeControl(args.decision_ms, args.time_bank_ms),
        reconnect_grace_s=args.reconnect_grace, rng_seed=args.seed,
        web_host=args.web_host, web_port=args.web_port)

    async def main() -> None:
        ladder = Ladder(_repo(args), config)
        await ladder.start()
        if ladder.voided_at_start:
            print(f"voided {len(ladder.voided_at_start)} matches that were in flight: "
                  f"{', '.join(ladder.voided_at_start)}", flush=True)
        print(f"ladder listening on {ladder.address}", flush=True)
        if args.web_port is not None:
            print(f"web pages on http://{ladder.web_address}/", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await ladder.stop()

    asyncio.run(main())
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    bot, token = _repo(args).register_bot(args.name, args.owner)
    print(f"registered {bot.name} version {bot.version} (owner {bot.owner})", file=sys.stderr)
    print("token (shown once; only its hash is stored):", file=sys.stderr)
    print(token)
    return 0


def cmd_retire(args: argparse.Namespace) -> int:
    _repo(args).retire_bot(args.name)
    print(f"retired {args.name}")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from rich.table import Table

    rows = _repo(args).leaderboard()
    if args.json:
        print(json.dumps([_plain(r) for r in rows], indent=1, default=str))
        return 0
    table = Table(title="Ladder standings (sorted by mu - 3 sigma)")
    for col in ("#", "bot", "owner", "mu-3sigma", "mu", "sigma", "games", "recent ranks"):
        table.add_column(col, justify="left" if col in ("bot", "owner") else "right")
    for r in rows:
        table.add_row(str(r.rank), r.bot, r.owner, f"{r.conservative:.2f}", f"{r.mu:.2f}",
                      f"{r.sigma:.2f}", str(r.games), " ".join(map(str, r.recent_ranks)))
    _console().print(table)
    return 0


def cmd_matches(args: argparse.Namespace) -> int:
    from rich.table import Table

    matches = _repo(args).list_matches(args.bot, args.table_size, args.limit)
    table = Table(title="Ladder matches, newest first")
    for col in ("match", "status", "players", "rated", "finished", "seats (score/rank)"):
        table.add_column(col)
    for m in matches:
        seats = ", ".join(f"{s.bot} {s.score if s.score is not None else '-'}/"
                          f"{s.rank if s.rank is not None else '-'}" for s in m.seats)
        table.add_row(m.match_id, m.status + (f" ({m.void_reason})" if m.void_reason else ""),
                      str(m.table_size), "yes" if m.rated else "no",
                      m.finished_at.isoformat(timespec="seconds") if m.finished_at else "-",
                      seats)
    _console().print(table)
    return 0


def cmd_bot(args: argparse.Namespace) -> int:
    from rich.table import Table
    from scout_arena.ratings import conservative

    profile = _repo(args).bot_profile(args.name)
    if profile is None:
        print(f"no bot named {args.name!r}", file=sys.stderr)
        return 1
    console = _console()
    bot = profile.bot
    console.print(f"[bold]{bot.name}[/bold] v{bot.version}, owner {bot.owner}"
                  + (" (retired)" if bot.retired else "")
                  + (f"\nprobation: {bot.probation_reason}" if bot.probation_reason else ""))
    console.print(f"timeouts {profile.timeouts}, forfeits {profile.forfeits}")
    sizes = Table(title="Results by table size")
    for col in ("players", "matches", "mean rank", "wins"):
        sizes.add_column(col, justify="right")
    for row in profile.by_table_size:
        sizes.add_row(str(row.table_size), str(row.matches), f"{row.mean_rank:.2f}",
                      str(row.wins))
    console.print(sizes)
    history = Table(title="Rating history (last 20)")
    for col in ("match", "mu", "sigma", "mu-3sigma"):
        history.add_column(col, justify="right")
    for point in profile.history[-20:]:
        history.add_row(point.match_id, f"{point.mu:.2f}", f"{point.sigma:.2f}",
                        f"{conservative(point.mu, point.sigma):.2f}")
    console.print(history)
    return 0


def cmd_recompute(args: argparse.Namespace) -> int:
    from scout_arena.ratings import replay_ratings

    repo = _repo(args)
    matches = [(m.bots, m.ranks) for m in repo.iter_finished_matches() if m.rated]
    ratings, games = replay_ratings(matches)
    stored = repo.ratings()
    differences = []
    for name in sorted(set(stored) | set(ratings)):
        have = stored.get(name)
        want = ratings.get(name)
        if have is None or want is None or have.mu != want.mu or have.sigma != want.sigma \
                or have.games != games.get(name, 0):
            differences.append((name, have, want))
    print(f"recomputed {len(matches)} rated matches for {len(ratings)} bots")
    for name, have, want in differences:
        print(f"  {name}: stored {have}, recomputed {want}")
    if not differences:
        print("stored ratings match the recomputation exactly")
        return 0
    return 1


def _plain(row: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return row


def add_ladder_parser(sub: Any) -> None:
    ladder = sub.add_parser("ladder", help="the rating ladder: serve, register, standings")
    ladder_sub = ladder.add_subparsers(dest="ladder_command", required=True)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--database", default=os.environ.get("SCOUT_LADDER_DATABASE",
                                                            DEFAULT_DATABASE),
                       help="SQLAlchemy URL: sqlite:///file.db (default ladder.db) or "
                            "postgresql+psycopg://user:pass@host/db")
        return p

    serve = with_db(ladder_sub.add_parser("serve", help="run the ladder"))
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=50061, help="0 picks a free port")
    serve.add_argument("--admin-token", default=os.environ.get("SCOUT_LADDER_ADMIN_TOKEN"))
    serve.add_argument("--table-sizes", default="4", help="comma-separated, e.g. 2,3,4")
    serve.add_argument("--allow-same-owner", action="store_true")
    serve.add_argument("--decision-ms", type=int, default=1000)
    serve.add_argument("--time-bank-ms", type=int, default=10_000)
    serve.add_argument("--reconnect-grace", type=float, default=10.0)
    serve.add_argument("--seed", type=int, help="matchmaker randomness (for reproducible tests)")
    serve.add_argument("--web-port", type=int, metavar="P",
                       help="also serve the web pages on this port (0 picks a free one)")
    serve.add_argument("--web-host", default="127.0.0.1")
    serve.add_argument("-v", "--verbose", action="store_true")
    serve.set_defaults(func=cmd_serve)

    reg = with_db(ladder_sub.add_parser("register", help="register a bot; prints its token"))
    reg.add_argument("name")
    reg.add_argument("--owner", required=True)
    reg.set_defaults(func=cmd_register)

    retire = with_db(ladder_sub.add_parser("retire", help="stop scheduling a bot"))
    retire.add_argument("name")
    retire.set_defaults(func=cmd_retire)

    board = with_db(ladder_sub.add_parser("leaderboard", help="print the standings"))
    board.add_argument("--json", action="store_true")
    board.set_defaults(func=cmd_leaderboard)

    matches = with_db(ladder_sub.add_parser("matches", help="print recent matches"))
    matches.add_argument("--bot")
    matches.add_argument("--table-size", type=int)
    matches.add_argument("--limit", type=int, default=30)
    matches.set_defaults(func=cmd_matches)

    bot = with_db(ladder_sub.add_parser("bot", help="print a bot's profile"))
    bot.add_argument("name")
    bot.set_defaults(func=cmd_bot)

    recompute = with_db(ladder_sub.add_parser(
        "recompute", help="rebuild every rating from the match history and compare"))
    recompute.set_defaults(func=cmd_recompute)
