"""`scout-arena ladder ...`: serve the ladder, register bots, print standings and history
(an owner's commands over the ladder's Owners service are in :mod:`.owner_cli`).

Errors are one line on stderr, never a traceback: exit status 2 for a usage error (a bad name,
owner or option), 1 for a refusal (a name of another owner, an unknown bot, no ladder database
at the URL, another ladder serving it, a database that fails). Only ``serve`` and ``register``
create a database; the others refuse a URL that names none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from scout_arena.clierrors import positive_int

from .cliguard import LadderParser, guarded
from .nodes_cli import add_nodes_command
from .owner_cli import add_client_options, add_owner_commands
from .serve_cli import add_serve_command

if TYPE_CHECKING:
    from rich.console import Console

    from .repository import Repository

DEFAULT_DATABASE = "sqlite:///ladder.db"


def _repo(args: argparse.Namespace, *, create: bool = False) -> Repository:
    """The repository at ``--database``, migrated. Without ``create``, a URL naming no ladder
    database is refused rather than turned into an empty one."""
    from .repository import NoLadderDatabaseError, Repository

    repo = Repository(args.database)
    if not create and not repo.exists():
        shown = repo.url
        repo.close()
        raise NoLadderDatabaseError(
            f"no ladder database at {shown} (check --database or SCOUT_LADDER_DATABASE; only "
            "`ladder serve` and `ladder register` create one)")
    repo.migrate()
    return repo


def _console() -> Console:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=140)


def cmd_register(args: argparse.Namespace) -> int:
    from .repository.common import check_bot_name, check_owner

    check_bot_name(args.name)  # before a database is created for nothing
    check_owner(args.owner)
    bot, token = _repo(args, create=True).register_bot(args.name, args.owner)
    print(f"registered {bot.name} version {bot.version} (owner {bot.owner})", file=sys.stderr)
    print("token (shown once; only its hash is stored):", file=sys.stderr)
    print(token)
    return 0


def cmd_retire(args: argparse.Namespace) -> int:
    if args.address:  # through a running ladder, as the bot's owner (or the admin)
        from .owner_cli import cmd_retire_remote, guarded

        return guarded(cmd_retire_remote)(args)
    _repo(args).retire_bot(args.name)
    print(f"retired {args.name}")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from rich.table import Table

    repo = _repo(args)
    rows = repo.leaderboard()
    if args.json:
        print(json.dumps([_plain(r) for r in rows], indent=1, default=str))
        return 0
    table = Table(title="Ladder standings (sorted by mu - 3 sigma)")
    for col in ("#", "bot", "owner", "mu-3sigma", "mu", "sigma", "games", "recent ranks"):
        table.add_column(col, justify="left" if col in ("bot", "owner") else "right")
    for r in rows:
        table.add_row(str(r.rank), r.bot, r.owner, f"{r.conservative:.2f}", f"{r.mu:.2f}",
                      f"{r.sigma:.2f}", str(r.games), " ".join(map(str, r.recent_ranks)))
    console = _console()
    console.print(table)
    bots = repo.list_bots()
    owners = len({bot.owner for bot in bots})
    if bots:
        # The one-bot-per-owner rule caps the table size: say so where standings are read.
        console.print(f"{len(bots)} bots of {owners} owners: a table seats one bot per owner "
                      f"(unless `ladder serve --allow-same-owner`), so at most {min(owners, 5)} "
                      "players a table")
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
        rated = "no (void)" if m.status == "void" else "yes" if m.rated else "no"
        table.add_row(m.match_id, m.status + (f" ({m.void_reason})" if m.void_reason else ""),
                      str(m.table_size), rated,
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
    console.print(f"[bold]{bot.name}[/bold] v{bot.version}, owner {bot.owner}, {bot.kind}"
                  + (" (retired)" if bot.retired else "")
                  + (f"\nprobation: {bot.probation_reason}" if bot.probation_reason else "")
                  + (f"\nowner suspended: {bot.suspended_reason}" if bot.suspended_reason
                     else "")
                  + (f"\npaused: {bot.paused_reason}" if bot.paused_reason else ""))
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
    from rich.table import Table

    from .recompute import check

    report = check(_repo(args).rating_snapshot())
    print(f"recomputed {report.matches} rated matches for {report.bots} bots")
    if not report.differences:
        print("stored ratings match the recomputation exactly")
        return 0

    def number(value: float | None, spec: str = ".6f") -> str:
        return "-" if value is None else format(value, spec)

    count = len(report.differences)
    table = Table(title=f"{count} bot{'' if count == 1 else 's'} whose stored rating is not "
                        "the recomputed one (delta = stored - recomputed)")
    for col in ("bot", "stored mu", "stored sigma", "stored games", "recomputed mu",
                "recomputed sigma", "recomputed games", "delta mu", "delta sigma"):
        table.add_column(col, justify="left" if col == "bot" else "right")
    for d in report.differences:
        stored, recomputed = d.stored, d.recomputed
        table.add_row(
            d.bot,
            number(None if stored is None else stored.mu),
            number(None if stored is None else stored.sigma),
            "-" if stored is None else str(stored.games),
            number(None if recomputed is None else recomputed.mu),
            number(None if recomputed is None else recomputed.sigma),
            str(d.recomputed_games), number(d.delta_mu, "+.3g"), number(d.delta_sigma, "+.3g"))
    _console().print(table)
    return 1


def _plain(row: object) -> object:
    import dataclasses

    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return row


def add_ladder_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ladder = sub.add_parser("ladder", help="the rating ladder: serve, register, standings")
    ladder_sub = ladder.add_subparsers(dest="ladder_command", required=True,
                                       parser_class=LadderParser)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--database", default=os.environ.get("SCOUT_LADDER_DATABASE",
                                                            DEFAULT_DATABASE),
                       help="SQLAlchemy URL: sqlite:///file.db (default ladder.db) or "
                            "postgresql+psycopg://user:pass@host/db")
        return p

    add_serve_command(ladder_sub, with_db)

    reg = with_db(ladder_sub.add_parser("register", help="register a bot; prints its token"))
    reg.add_argument("name")
    reg.add_argument("--owner", required=True)
    reg.set_defaults(func=guarded(cmd_register))

    retire = with_db(ladder_sub.add_parser(
        "retire", help="stop scheduling a bot (in the database, or with --address through "
        "a running ladder as its owner)"))
    retire.add_argument("name")
    add_client_options(retire, address_required=False)
    retire.set_defaults(address=None)
    retire.set_defaults(func=guarded(cmd_retire))

    board = with_db(ladder_sub.add_parser("leaderboard", help="print the standings"))
    board.add_argument("--json", action="store_true")
    board.set_defaults(func=guarded(cmd_leaderboard))

    matches = with_db(ladder_sub.add_parser("matches", help="print recent matches"))
    matches.add_argument("--bot")
    matches.add_argument("--table-size", type=int, choices=range(2, 6), metavar="N")
    matches.add_argument("--limit", type=positive_int, default=30)
    matches.set_defaults(func=guarded(cmd_matches))

    bot = with_db(ladder_sub.add_parser("bot", help="print a bot's profile"))
    bot.add_argument("name")
    bot.set_defaults(func=guarded(cmd_bot))

    add_owner_commands(ladder_sub)
    add_nodes_command(ladder_sub)

    recompute = with_db(ladder_sub.add_parser(
        "recompute", help="rebuild every rating from the match history and compare"))
    recompute.set_defaults(func=guarded(cmd_recompute))
