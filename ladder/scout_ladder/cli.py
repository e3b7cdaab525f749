"""`scout-arena ladder ...`: serve the ladder, register bots, print standings and history
(an owner's commands over the ladder's Owners service are in :mod:`.owner_cli`).

Errors are one line on stderr, never a traceback: exit status 2 for a usage error (a bad name,
owner or option), 1 for a refusal (a name of another owner, an unknown bot, no ladder database
at the URL, another ladder serving it, a database that fails). Only ``serve`` and ``register``
create a database; the others refuse a URL that names none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from scout_arena.clierrors import port_number, positive_seconds, seconds
from scout_arena.server.configfile import add_config_flag
from scout_arena.server.eventloop import run as run_on_loop
from scout_arena.server.flags import (
    add_hosting_flags,
    add_metrics_access_flags,
    add_time_control_flags,
    add_tls_flags,
    metrics_access,
    positive_int,
    time_control,
    tls_config,
)
from scout_arena.text import echo

from .nodes_cli import add_nodes_command
from .owner_cli import add_client_options, add_owner_commands
from .status import add_status_flag

if TYPE_CHECKING:
    from rich.console import Console

    from .repository import Repository

DEFAULT_DATABASE = "sqlite:///ladder.db"

log = logging.getLogger("scout_ladder")


class _Exit(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turns the errors a user can cause into one line on stderr and an exit status."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        from .repository import InvalidInputError, StorageError, UnknownBotError

        try:
            return command(args)
        except _Exit as exc:
            message, status = str(exc), exc.status
        except InvalidInputError as exc:
            message, status = str(exc), 2
        except UnknownBotError as exc:
            message, status = f"no bot named {echo(str(exc))}", 1
        except StorageError as exc:
            message, status = str(exc), 1
        except ArgumentError as exc:
            message, status = f"--database is not a database URL: {_one_line(exc)}", 2
        except SQLAlchemyError as exc:
            message, status = f"the database failed: {_one_line(exc)}", 1
        except ValueError as exc:  # e.g. a URL of a database the ladder does not support
            message, status = _one_line(exc), 2
        except OSError as exc:  # a port in use, a folder that cannot be made
            message = exc.strerror or _one_line(exc)
            if exc.filename is not None:
                message = f"{str(exc.filename)[:100]!r}: {message}"
            status = 1
        print(f"scout-arena ladder {args.ladder_command}: {message}", file=sys.stderr)
        return status

    return run


class _Parser(argparse.ArgumentParser):
    """A ladder command's parser: a usage error is one line (and status 2), not a usage
    block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _table_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        sizes = ()
    if not sizes or not all(2 <= size <= 5 for size in sizes):
        raise argparse.ArgumentTypeError(
            f"sizes from 2 to 5 separated by commas, e.g. 4 or 2,3,4; got {echo(text)}")
    return sizes


def _console() -> Console:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=140)


def cmd_serve(args: argparse.Namespace) -> int:

    from .localnodes import LocalNodes
    from .matchmaker import MatchmakerConfig
    from .owners_service import Registration
    from .repository import LeaseHeldError, OwnerLimits, Repository, new_token
    from .service import Ladder, LadderConfig
    from .status import StatusReporter, ladder_status

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = LadderConfig(
        host=args.host, port=args.port, admin_token=args.admin_token,
        matchmaker=MatchmakerConfig(table_sizes=args.table_sizes,
                                    allow_same_owner=args.allow_same_owner),
        time_control=time_control(args),
        reconnect_grace_s=args.reconnect_grace, rng_seed=args.seed,
        web_host=args.web_host, web_port=args.web_port,
        registration=Registration(args.registration), hosting=not args.no_hosting,
        hosting_dir=Path(args.hosting_dir) if args.hosting_dir else None,
        hosted_data_mb=args.hosted_data_mb)
    limits = OwnerLimits(bots_per_owner=args.max_bots_per_owner,
                         submissions_per_hour=args.max_submissions_per_hour,
                         max_upload_bytes=args.max_upload_mb * 2**20)
    try:
        config.tls = tls_config(args)
        access = metrics_access(args)
    except ValueError as exc:
        raise _Exit(str(exc), 2) from None
    if args.storage is not None and Path(args.storage).exists() \
            and not Path(args.storage).is_dir():
        raise _Exit(f"--storage: {args.storage} is not a folder", 2)
    node_token = args.node_token or os.environ.get("SCOUT_NODE_TOKEN") or None
    if args.nodes is not None:
        if args.nodes < 1:
            raise _Exit("--nodes: at least 1", 2)
        node_token = node_token or new_token(24)
    if node_token is not None:
        config.node_token = node_token
        config.join_timeout_s = args.join_timeout
        config.node_heartbeat_timeout_s = args.node_heartbeat_timeout

    async def main() -> int:
        # Handlers first: a SIGTERM while starting, or right after "listening", stops cleanly.
        stop = asyncio.Event()
        main_task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set() and main_task is not None:
                main_task.cancel()  # a second signal: stop at once
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, on_signal)
        repo = Repository(args.database, storage=args.storage, limits=limits)
        try:
            ladder = Ladder(repo, config)
        except OSError as exc:  # the gRPC port: in use, or not this machine's address
            repo.close()
            raise _Exit(exc.strerror or str(exc), 1) from None
        try:
            await ladder.start()
        except LeaseHeldError as exc:
            repo.close()
            raise _Exit(str(exc), 1) from None
        except OSError as exc:  # the web port (the referee stopped again by `start`)
            repo.close()
            where = f"--web-port: cannot listen on {args.web_host}:{args.web_port}" \
                if args.web_port is not None else "cannot start"
            reason = (exc.strerror or str(exc)).split(" (while attempting")[0]
            raise _Exit(f"{where}: {reason}", 1) from None
        if ladder.voided_at_start:
            print(f"voided {len(ladder.voided_at_start)} matches that were in flight: "
                  f"{', '.join(ladder.voided_at_start)}", flush=True)
        metrics_url = None
        if args.metrics_port is not None:
            try:
                metrics_url = ladder.referee.serve_metrics(args.metrics_host, args.metrics_port,
                                                           access)
            except OSError as exc:
                try:
                    await ladder.stop()
                finally:
                    repo.close()
                raise _Exit(f"--metrics-port: cannot listen on {args.metrics_host}:"
                            f"{args.metrics_port}: {exc.strerror or exc}", 1) from None
        from scout_arena.server.hardening import tune_gc  # gRPC: not for --help

        tune_gc()  # the ladder hosts the referee: the same stall-free collection policy
        print(f"ladder listening on {ladder.address}", flush=True)
        local_nodes = None
        if args.nodes is not None:
            assert node_token is not None
            local_nodes = LocalNodes(args.nodes, ladder.address, node_token, args.host,
                                     Path(args.node_records), capacity=args.node_capacity,
                                     decision_ms=args.decision_ms,
                                     time_bank_ms=args.time_bank_ms, verbose=args.verbose,
                                     tls=(args.tls_cert, args.tls_key) if args.tls_cert
                                     else None, hosting=not args.no_hosting,
                                     hosted_data_mb=args.hosted_data_mb)
            try:
                addresses = await local_nodes.start()
            except Exception as exc:
                await local_nodes.stop()
                await ladder.stop()
                repo.close()
                raise _Exit(f"--nodes: the local nodes did not start: {exc!r}", 1) from None
            print(f"{len(addresses)} local referee nodes on {', '.join(addresses)}", flush=True)
        elif node_token is not None:
            print("serving referee nodes (scout-arena referee serve --join "
                  f"{ladder.address})", flush=True)
        if metrics_url is not None:
            print(f"metrics on {metrics_url}", flush=True)
        if args.web_port is not None:
            print(f"web pages on http://{ladder.web_address}/", flush=True)
        if args.admin_token is None:
            log.warning("no --admin-token: RegisterBot and RetireBot are open to anyone who "
                        "reaches %s", ladder.address)
        reporter = StatusReporter(lambda: ladder_status(ladder), args.status_every)
        reporter.start()
        waits = [asyncio.ensure_future(stop.wait()),
                 asyncio.ensure_future(ladder.stop_requested.wait())]
        # A grpc server that died (scout_arena.server.liveness) takes no new bot: drain for a
        # few seconds and exit with status 3, so that a supervisor restarts the ladder.
        dead = asyncio.ensure_future(ladder.referee.wait_dead())
        await asyncio.wait([*waits, dead], return_when=asyncio.FIRST_COMPLETED)
        for waiting in [*waits, dead]:
            waiting.cancel()
        await reporter.stop()
        if local_nodes is not None:
            ladder.pause()
            await local_nodes.stop()
        if dead.done() and not dead.cancelled():
            try:
                await ladder.referee.exit_dead(ladder.address, dead.result(), ladder.stop())
            finally:
                repo.close()
        try:
            await ladder.stop()
        except asyncio.CancelledError:
            print("scout-arena ladder serve: stopped at once on a second signal; matches whose "
                  "result was not stored yet stay in flight until the next start voids them",
                  file=sys.stderr, flush=True)
            return 1
        finally:
            repo.close()
        reporter.print_summary()
        if ladder.failure:
            print(f"scout-arena ladder serve: {ladder.failure}", file=sys.stderr, flush=True)
            return 1
        return 0

    return run_on_loop(main())  # stock asyncio; $SCOUT_EVENT_LOOP=uvloop to choose uvloop


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


def _add_owner_flags(serve: argparse.ArgumentParser) -> None:
    owners = serve.add_argument_group(
        "owner accounts", "who may sign up, and what each owner may do (docs/PROTOCOL.md §19)")
    owners.add_argument("--registration", choices=("open", "invite", "closed"), default="closed",
                        help="open: anybody signs up; invite: with a code from `ladder invite`; "
                             "closed (default): only the admin token makes accounts")
    owners.add_argument("--storage", metavar="DIR",
                        help="hosted bots' uploads and data folders (default: "
                             "<database file>-storage beside a SQLite file, else "
                             "./ladder-storage)")
    owners.add_argument("--max-bots-per-owner", type=positive_int, default=10, metavar="N")
    owners.add_argument("--max-submissions-per-hour", type=positive_int, default=10, metavar="N")
    owners.add_argument("--max-upload-mb", type=positive_int, default=50, metavar="MB")


def add_ladder_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ladder = sub.add_parser("ladder", help="the rating ladder: serve, register, standings")
    ladder_sub = ladder.add_subparsers(dest="ladder_command", required=True,
                                       parser_class=_Parser)

    def with_db(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--database", default=os.environ.get("SCOUT_LADDER_DATABASE",
                                                            DEFAULT_DATABASE),
                       help="SQLAlchemy URL: sqlite:///file.db (default ladder.db) or "
                            "postgresql+psycopg://user:pass@host/db")
        return p

    serve = with_db(ladder_sub.add_parser("serve", help="run the ladder"))
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_number, default=50061, help="0 picks a free port")
    serve.add_argument("--admin-token", default=os.environ.get("SCOUT_LADDER_ADMIN_TOKEN"))
    serve.add_argument("--table-sizes", type=_table_sizes, default=(4,),
                       help="comma-separated, e.g. 2,3,4 (default 4)")
    serve.add_argument("--allow-same-owner", action="store_true")
    add_time_control_flags(serve)
    serve.add_argument("--reconnect-grace", type=seconds, default=10.0, metavar="SECONDS")
    serve.add_argument("--seed", type=int, help="matchmaker randomness (for reproducible tests)")
    serve.add_argument("--web-port", type=port_number, metavar="P",
                       help="also serve the web pages on this port (0 picks a free one)")
    serve.add_argument("--web-host", default="127.0.0.1")
    serve.add_argument("--metrics-port", type=port_number, metavar="P",
                       help="serve the hosted referee's Prometheus metrics on "
                       "http://HOST:P/metrics (0 picks a free port; default: none)")
    serve.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST")
    add_metrics_access_flags(serve)
    _add_owner_flags(serve)
    add_hosting_flags(serve)
    add_tls_flags(serve)
    nodes = serve.add_argument_group(
        "referee nodes", "play the matches on referee nodes (docs/deploy.md#nodes)")
    nodes.add_argument("--node-token", metavar="TOKEN",
                       help="serve nodes that attach with this token (default: "
                            "$SCOUT_NODE_TOKEN); every match is then played on a node")
    nodes.add_argument("--nodes", type=positive_int, metavar="N",
                       help="start N local referee node processes (one per core)")
    nodes.add_argument("--node-records", default="node-records", metavar="DIR",
                       help="records and logs of the local nodes (default ./node-records)")
    nodes.add_argument("--node-capacity", type=positive_int, default=100, metavar="N",
                       help="matches at once per local node (default 100)")
    nodes.add_argument("--join-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
                       help="how long a node waits for a match's bots (then they forfeit)")
    nodes.add_argument("--node-heartbeat-timeout", type=positive_seconds, default=5.0,
                       metavar="SECONDS",
                       help="a node silent this long is lost and its matches voided")
    add_status_flag(serve)
    serve.add_argument("-v", "--verbose", action="store_true")
    add_config_flag(serve)
    serve.set_defaults(func=_guarded(cmd_serve))

    reg = with_db(ladder_sub.add_parser("register", help="register a bot; prints its token"))
    reg.add_argument("name")
    reg.add_argument("--owner", required=True)
    reg.set_defaults(func=_guarded(cmd_register))

    retire = with_db(ladder_sub.add_parser(
        "retire", help="stop scheduling a bot (in the database, or with --address through "
        "a running ladder as its owner)"))
    retire.add_argument("name")
    add_client_options(retire, address_required=False)
    retire.set_defaults(address=None)
    retire.set_defaults(func=_guarded(cmd_retire))

    board = with_db(ladder_sub.add_parser("leaderboard", help="print the standings"))
    board.add_argument("--json", action="store_true")
    board.set_defaults(func=_guarded(cmd_leaderboard))

    matches = with_db(ladder_sub.add_parser("matches", help="print recent matches"))
    matches.add_argument("--bot")
    matches.add_argument("--table-size", type=int, choices=range(2, 6), metavar="N")
    matches.add_argument("--limit", type=positive_int, default=30)
    matches.set_defaults(func=_guarded(cmd_matches))

    bot = with_db(ladder_sub.add_parser("bot", help="print a bot's profile"))
    bot.add_argument("name")
    bot.set_defaults(func=_guarded(cmd_bot))

    add_owner_commands(ladder_sub)
    add_nodes_command(ladder_sub)

    recompute = with_db(ladder_sub.add_parser(
        "recompute", help="rebuild every rating from the match history and compare"))
    recompute.set_defaults(func=_guarded(cmd_recompute))
