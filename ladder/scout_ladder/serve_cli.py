"""`scout-arena ladder serve`: the ladder's services, its scheduler, its web pages and its
referee nodes, with the flags that set them up.

Apart from `cli` (which registers it) because serving has most of the ladder's flags and all
of its start-up and shutdown; the other ladder commands only read or write the database.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from scout_arena.clierrors import port_number, positive_int, positive_seconds, seconds
from scout_arena.server.configfile import add_config_flag
from scout_arena.server.eventloop import run as run_on_loop
from scout_arena.server.flags import (
    add_hosting_flags,
    add_metrics_access_flags,
    add_time_control_flags,
    add_tls_flags,
    metrics_access,
    time_control,
    tls_config,
)
from scout_arena.text import echo

from .cliguard import CommandExit, LadderParser, guarded
from .status import add_status_flag

log = logging.getLogger("scout_ladder")


def _table_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        sizes = ()
    if not sizes or not all(2 <= size <= 5 for size in sizes):
        raise argparse.ArgumentTypeError(
            f"sizes from 2 to 5 separated by commas, e.g. 4 or 2,3,4; got {echo(text)}"
        )
    return sizes


def cmd_serve(args: argparse.Namespace) -> int:

    from .localnodes import LocalNodes
    from .matchmaker import MatchmakerConfig
    from .owners_service import Registration
    from .repository import LeaseHeldError, OwnerLimits, Repository, new_token
    from .service import Ladder, LadderConfig
    from .status import StatusReporter, ladder_status

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = LadderConfig(
        host=args.host,
        port=args.port,
        admin_token=args.admin_token,
        matchmaker=MatchmakerConfig(
            table_sizes=args.table_sizes, allow_same_owner=args.allow_same_owner
        ),
        time_control=time_control(args),
        reconnect_grace_s=args.reconnect_grace,
        rng_seed=args.seed,
        web_host=args.web_host,
        web_port=args.web_port,
        registration=Registration(args.registration),
        hosting=not args.no_hosting,
        hosting_dir=Path(args.hosting_dir) if args.hosting_dir else None,
        hosted_data_mb=args.hosted_data_mb,
    )
    limits = OwnerLimits(
        bots_per_owner=args.max_bots_per_owner,
        submissions_per_hour=args.max_submissions_per_hour,
        max_upload_bytes=args.max_upload_mb * 2**20,
    )
    try:
        config.tls = tls_config(args)
        access = metrics_access(args)
    except ValueError as exc:
        raise CommandExit(str(exc), 2) from None
    if args.storage is not None and Path(args.storage).exists() and not Path(args.storage).is_dir():
        raise CommandExit(f"--storage: {args.storage} is not a folder", 2)
    node_token = args.node_token or os.environ.get("SCOUT_NODE_TOKEN") or None
    if args.nodes is not None:
        if args.nodes < 1:
            raise CommandExit("--nodes: at least 1", 2)
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
            raise CommandExit(exc.strerror or str(exc), 1) from None
        try:
            await ladder.start()
        except LeaseHeldError as exc:
            repo.close()
            raise CommandExit(str(exc), 1) from None
        except OSError as exc:  # the web port (the referee stopped again by `start`)
            repo.close()
            where = (
                f"--web-port: cannot listen on {args.web_host}:{args.web_port}"
                if args.web_port is not None
                else "cannot start"
            )
            reason = (exc.strerror or str(exc)).split(" (while attempting")[0]
            raise CommandExit(f"{where}: {reason}", 1) from None
        if ladder.voided_at_start:
            print(
                f"voided {len(ladder.voided_at_start)} matches that were in flight: "
                f"{', '.join(ladder.voided_at_start)}",
                flush=True,
            )
        metrics_url = None
        if args.metrics_port is not None:
            try:
                metrics_url = ladder.referee.serve_metrics(
                    args.metrics_host, args.metrics_port, access
                )
            except OSError as exc:
                try:
                    await ladder.stop()
                finally:
                    repo.close()
                raise CommandExit(
                    f"--metrics-port: cannot listen on {args.metrics_host}:"
                    f"{args.metrics_port}: {exc.strerror or exc}",
                    1,
                ) from None
        from scout_arena.server.hardening import tune_gc  # gRPC: not for --help

        tune_gc()  # the ladder hosts the referee: the same stall-free collection policy
        print(f"ladder listening on {ladder.address}", flush=True)
        local_nodes = None
        if args.nodes is not None:
            assert node_token is not None
            local_nodes = LocalNodes(
                args.nodes,
                ladder.address,
                node_token,
                args.host,
                Path(args.node_records),
                capacity=args.node_capacity,
                decision_ms=args.decision_ms,
                time_bank_ms=args.time_bank_ms,
                verbose=args.verbose,
                tls=(args.tls_cert, args.tls_key) if args.tls_cert else None,
                hosting=not args.no_hosting,
                hosted_data_mb=args.hosted_data_mb,
            )
            try:
                addresses = await local_nodes.start()
            except Exception as exc:
                await local_nodes.stop()
                await ladder.stop()
                repo.close()
                raise CommandExit(f"--nodes: the local nodes did not start: {exc!r}", 1) from None
            print(f"{len(addresses)} local referee nodes on {', '.join(addresses)}", flush=True)
        elif node_token is not None:
            print(
                f"serving referee nodes (scout-arena referee serve --join {ladder.address})",
                flush=True,
            )
        if metrics_url is not None:
            print(f"metrics on {metrics_url}", flush=True)
        if args.web_port is not None:
            print(f"web pages on http://{ladder.web_address}/", flush=True)
        if args.admin_token is None:
            log.warning(
                "no --admin-token: RegisterBot and RetireBot are open to anyone who reaches %s",
                ladder.address,
            )
        reporter = StatusReporter(lambda: ladder_status(ladder), args.status_every)
        reporter.start()
        waits = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(ladder.stop_requested.wait()),
        ]
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
            print(
                "scout-arena ladder serve: stopped at once on a second signal; matches whose "
                "result was not stored yet stay in flight until the next start voids them",
                file=sys.stderr,
                flush=True,
            )
            return 1
        finally:
            repo.close()
        reporter.print_summary()
        if ladder.failure:
            print(f"scout-arena ladder serve: {ladder.failure}", file=sys.stderr, flush=True)
            return 1
        return 0

    return run_on_loop(main())  # stock asyncio; $SCOUT_EVENT_LOOP=uvloop to choose uvloop


def _add_owner_flags(serve: argparse.ArgumentParser) -> None:
    owners = serve.add_argument_group(
        "owner accounts", "who may sign up, and what each owner may do (docs/PROTOCOL.md §19)"
    )
    owners.add_argument(
        "--registration",
        choices=("open", "invite", "closed"),
        default="closed",
        help="open: anybody signs up; invite: with a code from `ladder invite`; "
        "closed (default): only the admin token makes accounts",
    )
    owners.add_argument(
        "--storage",
        metavar="DIR",
        help="hosted bots' uploads and data folders (default: "
        "<database file>-storage beside a SQLite file, else "
        "./ladder-storage)",
    )
    owners.add_argument("--max-bots-per-owner", type=positive_int, default=10, metavar="N")
    owners.add_argument("--max-submissions-per-hour", type=positive_int, default=10, metavar="N")
    owners.add_argument("--max-upload-mb", type=positive_int, default=50, metavar="MB")


def add_serve_command(
    ladder_sub: argparse._SubParsersAction[LadderParser],
    with_db: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
) -> None:
    """``ladder serve``; ``with_db`` adds the --database flag every ladder command has."""
    serve = with_db(ladder_sub.add_parser("serve", help="run the ladder"))
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_number, default=50061, help="0 picks a free port")
    serve.add_argument("--admin-token", default=os.environ.get("SCOUT_LADDER_ADMIN_TOKEN"))
    serve.add_argument(
        "--table-sizes",
        type=_table_sizes,
        default=(4,),
        help="comma-separated, e.g. 2,3,4 (default 4)",
    )
    serve.add_argument("--allow-same-owner", action="store_true")
    add_time_control_flags(serve)
    serve.add_argument("--reconnect-grace", type=seconds, default=10.0, metavar="SECONDS")
    serve.add_argument("--seed", type=int, help="matchmaker randomness (for reproducible tests)")
    serve.add_argument(
        "--web-port",
        type=port_number,
        metavar="P",
        help="also serve the web pages on this port (0 picks a free one)",
    )
    serve.add_argument("--web-host", default="127.0.0.1")
    serve.add_argument(
        "--metrics-port",
        type=port_number,
        metavar="P",
        help="serve the hosted referee's Prometheus metrics on "
        "http://HOST:P/metrics (0 picks a free port; default: none)",
    )
    serve.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST")
    add_metrics_access_flags(serve)
    _add_owner_flags(serve)
    add_hosting_flags(serve)
    add_tls_flags(serve)
    nodes = serve.add_argument_group(
        "referee nodes", "play the matches on referee nodes (docs/deploy.md#nodes)"
    )
    nodes.add_argument(
        "--node-token",
        metavar="TOKEN",
        help="serve nodes that attach with this token (default: "
        "$SCOUT_NODE_TOKEN); every match is then played on a node",
    )
    nodes.add_argument(
        "--nodes",
        type=positive_int,
        metavar="N",
        help="start N local referee node processes (one per core)",
    )
    nodes.add_argument(
        "--node-records",
        default="node-records",
        metavar="DIR",
        help="records and logs of the local nodes (default ./node-records)",
    )
    nodes.add_argument(
        "--node-capacity",
        type=positive_int,
        default=100,
        metavar="N",
        help="matches at once per local node (default 100)",
    )
    nodes.add_argument(
        "--join-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long a node waits for a match's bots (then they forfeit)",
    )
    nodes.add_argument(
        "--node-heartbeat-timeout",
        type=positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="a node silent this long is lost and its matches voided",
    )
    add_status_flag(serve)
    serve.add_argument("-v", "--verbose", action="store_true")
    add_config_flag(serve)
    serve.set_defaults(func=guarded(cmd_serve))
