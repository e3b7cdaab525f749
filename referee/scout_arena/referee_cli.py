"""`scout-arena referee serve`: the gRPC referee server, alone or as a ladder's node.

Apart from `cli` (which lists it) because serving is the one command with that many flags and
that much start-up: tokens, TLS, metrics, a Unix socket, and joining a ladder as its node.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from .clierrors import CommandError, host_port, nonnegative_int, port_number, positive_int, seconds
from .server.configfile import add_config_flag
from .server.eventloop import EVENT_LOOPS
from .server.eventloop import run as run_on_loop
from .server.flags import (
    add_hosting_flags,
    add_metrics_access_flags,
    add_time_control_flags,
    add_tls_flags,
    metrics_access,
    time_control,
    tls_config,
)

if TYPE_CHECKING:
    from .hosting.node import NodeHosting
    from .server import Referee
    from .server.node import NodeConfig

    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _add_event_loop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=None,
        help="asyncio event loop: stock asyncio (the default, or "
        "$SCOUT_EVENT_LOOP), uvloop, or auto (uvloop when installed)",
    )


def _add_metrics_flags(parser: argparse.ArgumentParser) -> None:
    """--metrics-port and --metrics-host: Prometheus metrics over HTTP (docs/deploy.md)."""
    parser.add_argument(
        "--metrics-port",
        type=port_number,
        metavar="P",
        help="serve Prometheus metrics on http://HOST:P/metrics (0 picks a "
        "free port; default: no metrics server)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="interface of the metrics server (default 127.0.0.1)",
    )
    add_metrics_access_flags(parser)


def _pass_budget_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError("a pass budget is more than 0 and at most 1000 ms")
    return value


#: sun_path holds 108 bytes, the terminating NUL included.
_UNIX_PATH_MAX = 107


def _unix_socket(text: str) -> Path:
    path = Path(text).absolute()
    if len(os.fsencode(path)) > _UNIX_PATH_MAX:
        raise argparse.ArgumentTypeError(
            f"{str(path)!r} is longer than a Unix socket path may be ({_UNIX_PATH_MAX} bytes)"
        )
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {str(path.parent)!r}")
    if path.exists() and not path.is_socket():
        raise argparse.ArgumentTypeError(f"{str(path)!r} exists and is not a socket")
    return path


def _tokens(args: argparse.Namespace) -> dict[str, str]:
    tokens: dict[str, str] = {}
    if args.tokens:
        try:
            data = json.loads(Path(args.tokens).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not JSON"
            raise CommandError(f"--tokens {args.tokens[:100]!r}: {reason}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise CommandError(
                f"--tokens {args.tokens[:100]!r}: expected a JSON object {{bot name: token}}"
            )
        tokens.update(data)
    for item in args.bot_token or []:
        name, sep, token = item.partition("=")
        if not sep or not name or not token:
            raise CommandError(f"--bot-token takes NAME=TOKEN, got {item[:40]!r}")
        tokens[name] = token
    return tokens


NODE_FLUSH_S = 5.0
"""On stop, how long a node waits for its ladder to take its last reports."""
NODE_CHECK_S = 0.5
"""How often a node's readiness looks at its link to the ladder."""


def node_config(args: argparse.Namespace, address: str, bots_tls: bool) -> NodeConfig:
    """The NodeConfig of ``referee serve --join``: the token from --node-token or
    SCOUT_NODE_TOKEN, the address bots reach from --advertise (default: where it listens)."""
    import grpc

    from .server.node import NodeConfig

    token = args.node_token or os.environ.get("SCOUT_NODE_TOKEN", "")
    if not token:
        raise CommandError("--join needs the ladder's node token: --node-token or SCOUT_NODE_TOKEN")
    credentials = None
    if args.ladder_ca or args.ladder_tls:
        ca = None
        if args.ladder_ca:
            try:
                ssl.create_default_context(cafile=args.ladder_ca)
                ca = Path(args.ladder_ca).read_bytes()
            except (OSError, ssl.SSLError) as exc:
                raise CommandError(
                    f"--ladder-ca {args.ladder_ca[:100]!r}: not a readable PEM "
                    f"CA certificate ({type(exc).__name__})"
                ) from None
        credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    return NodeConfig(
        ladder=args.join,
        token=token,
        advertise=args.advertise or address,
        capacity=args.capacity,
        name=args.node_name or "",
        bots_tls=bots_tls,
        ladder_credentials=credentials,
    )


def node_hosting(args: argparse.Namespace, referee: Referee) -> NodeHosting | None:
    """The hosting of a node (``--join``): bots run in the sandbox when this host can run
    one (`scout_arena.sandbox.probe`) and ``--no-hosting`` is not given; None otherwise (the
    node tells its ladder it cannot host, and why)."""
    import logging
    import tempfile

    from .hosting.node import NodeHosting
    from .sandbox import Sandbox, SandboxSupport, probe

    if args.no_hosting:
        return None
    support = probe()
    if not support.available:
        logging.getLogger("scout_arena.hosting").warning(
            "this node cannot host bots: %s", support.reason
        )
        support = SandboxSupport(False, support.reason, support.cgroups)
    workdir = (
        Path(args.hosting_dir) if args.hosting_dir else Path(tempfile.mkdtemp(prefix="scout-node-"))
    )
    return NodeHosting(
        referee,
        Sandbox(),
        workdir,
        support,
        args.hosted_data_mb * 2**20,
        remove_workdir=not args.hosting_dir,
    )


def cmd_referee_serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from .sandbox.lifeline import hold_lifeline
    from .server import Referee, RefereeServer, serve_forever
    from .server.convert import ProtobufWire
    from .server.hardening import watch_gc_pauses
    from .server.matches_service import admin_token_problem
    from .server.metrics import MetricsServer, serve_metrics
    from .server.node import NodeLink

    hold_lifeline()  # a ladder's local node (SCOUT_LIFELINE set) stops when the ladder dies
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.admin_token is not None:
        problem = admin_token_problem(args.admin_token)
        if problem is not None:
            raise CommandError(f"--admin-token: {problem}")
    try:
        tls = tls_config(args)
        access = metrics_access(args)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    records = Path(args.records)
    if records.exists() and not records.is_dir():
        raise CommandError(f"--records {args.records[:100]!r} is a file, not a folder")
    records.mkdir(parents=True, exist_ok=True)
    tokens = _tokens(args)
    if args.join:
        node_config(args, "", tls is not None)  # its problems before anything starts

    async def main() -> None:
        referee = Referee(
            tokens,
            wire=ProtobufWire(),
            records_dir=records,
            default_time_control=time_control(args),
            reconnect_grace_s=args.reconnect_grace,
            pass_budget_ms=args.pass_budget_ms,
        )
        server = RefereeServer(
            referee,
            host=args.host,
            port=args.port,
            admin_token=args.admin_token,
            tls=tls,
            max_streams_per_connection=args.max_streams_per_connection,
            max_streams_per_token=args.max_streams_per_token,
            goodbye_retry_after_ms=args.goodbye_retry_ms,
            gc_policy=True,
        )
        if args.unix_socket is not None:
            # Plaintext: who may connect is up to the socket file's permissions.
            unix_address = f"unix:{args.unix_socket}"
            if not server.server.add_insecure_port(unix_address):
                raise CommandError(f"--unix-socket: cannot listen on {unix_address}", 1)
        metrics: MetricsServer | None = None
        if args.metrics_port is not None:
            try:
                metrics = serve_metrics(
                    referee.metrics,
                    args.metrics_host,
                    args.metrics_port,
                    probes=server.health,
                    access=access,
                )
            except OSError as exc:
                raise CommandError(
                    f"--metrics-port: cannot listen on {args.metrics_host}:"
                    f"{args.metrics_port}: {exc.strerror or exc}",
                    1,
                ) from None
        ready = asyncio.Event()
        task = asyncio.create_task(serve_forever(server, args.drain_seconds, ready))
        await ready.wait()  # the server has started, and with it the GC policy (hardening)
        watch_gc_pauses(referee.metrics.gc_paused)
        print(f"referee listening on {server.address}", flush=True)
        if args.admin_token is None:  # after binding: the port, not 0, is named
            logging.getLogger("scout_arena.referee").warning(
                "no --admin-token: the Matches service is open to every client that reaches "
                "%s (anyone can create and watch matches and read records)",
                server.address,
            )
        if args.unix_socket is not None:
            print(f"referee also listening on unix:{args.unix_socket}", flush=True)
        link_task = None
        hosting = None
        if args.join:
            hosting = node_hosting(args, referee)
            link = NodeLink(referee, node_config(args, server.address, tls is not None), hosting)
            link_task = asyncio.create_task(link.run(), name="node link")

            async def attached() -> str | None:  # readiness: a node serves its ladder
                return None if link.attached.is_set() else f"not attached to {args.join}"

            server.health.watch("ladder", attached, NODE_CHECK_S)
            print(f"node of the ladder {args.join}", flush=True)
        if metrics is not None:
            print(f"metrics on {metrics.url}", flush=True)
        logging.getLogger("scout_arena.referee").info(
            "event loop: %s", type(asyncio.get_running_loop()).__module__.split(".")[0]
        )
        try:
            await task
        finally:
            if hosting is not None:
                await hosting.close()  # stops the hosted bots, reports their runs
            if link_task is not None:
                await link.flush(NODE_FLUSH_S)  # the reports of the matches just aborted
                link_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await link_task

    try:
        run_on_loop(main(), args.event_loop)
    except OSError as exc:  # the gRPC port (Listener): in use, or not this machine's address
        raise CommandError(exc.strerror or str(exc), 1) from None
    return 0


def add_referee_parser(sub: _Subparsers) -> None:
    """`scout-arena referee serve`."""
    from .server.arena_service import MAX_STREAMS_PER_TOKEN
    from .server.listener import MAX_STREAMS_PER_CONNECTION
    from .server.turns import DEFAULT_PASS_BUDGET_MS

    referee = sub.add_parser("referee", help="the gRPC referee server")
    referee_sub = referee.add_subparsers(dest="referee_command", required=True)
    serve = referee_sub.add_parser("serve", help="serve the Arena and Matches services")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_number, default=50051, help="0 picks a free port")
    serve.add_argument(
        "--unix-socket",
        type=_unix_socket,
        metavar="PATH",
        help="also listen on this Unix domain socket (plaintext, next to "
        "HOST:PORT); bots reach it with the address unix:PATH",
    )
    serve.add_argument("--tokens", metavar="FILE", help="JSON object {bot name: token}")
    serve.add_argument("--bot-token", action="append", metavar="NAME=TOKEN")
    serve.add_argument(
        "--admin-token",
        default=os.environ.get("SCOUT_REFEREE_ADMIN_TOKEN"),
        help="token the Matches service requires (default: $SCOUT_REFEREE_ADMIN_TOKEN)",
    )
    serve.add_argument(
        "--records",
        default="records",
        metavar="DIR",
        help="where match records are written (default ./records)",
    )
    add_time_control_flags(serve)
    serve.add_argument("--reconnect-grace", type=seconds, default=10.0, metavar="SECONDS")
    serve.add_argument(
        "--drain-seconds",
        type=seconds,
        default=0.0,
        help="on shutdown, let running matches finish this long",
    )
    add_tls_flags(serve)
    serve.add_argument(
        "--max-streams-per-connection",
        type=positive_int,
        default=MAX_STREAMS_PER_CONNECTION,
        metavar="N",
        help="HTTP/2 streams (calls) one connection may have open at once",
    )
    serve.add_argument(
        "--max-streams-per-token",
        type=positive_int,
        default=MAX_STREAMS_PER_TOKEN,
        metavar="N",
        help="Play streams one bot token may have open at once",
    )
    serve.add_argument(
        "--pass-budget-ms",
        type=_pass_budget_ms,
        default=DEFAULT_PASS_BUDGET_MS,
        metavar="MS",
        help="how much of one event-loop pass match turns may take; the rest "
        "wait for the next, so other calls are not held up (default "
        f"{DEFAULT_PASS_BUDGET_MS:g}; docs/deploy.md#under-load)",
    )
    serve.add_argument(
        "--goodbye-retry-ms",
        type=nonnegative_int,
        default=2000,
        metavar="MS",
        help="how long the Goodbye of a shutdown asks bots to wait before they reconnect",
    )
    node = serve.add_argument_group(
        "ladder node", "serve as one of a ladder's referee nodes (docs/deploy.md#nodes)"
    )
    node.add_argument(
        "--join",
        metavar="HOST:PORT",
        type=host_port,
        help="register with the ladder there and host the matches it assigns",
    )
    node.add_argument(
        "--node-token", metavar="TOKEN", help="the ladder's node token (default: $SCOUT_NODE_TOKEN)"
    )
    node.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        type=host_port,
        help="the address bots reach this node on (default: where it listens)",
    )
    node.add_argument(
        "--capacity",
        type=positive_int,
        default=100,
        metavar="N",
        help="most ladder matches at once (default 100)",
    )
    node.add_argument("--node-name", metavar="NAME", help="for the ladder's pages and logs")
    node.add_argument("--ladder-tls", action="store_true", help="reach the ladder over TLS")
    node.add_argument(
        "--ladder-ca",
        metavar="PEM",
        help="CA that signed the ladder's certificate (implies --ladder-tls)",
    )
    add_hosting_flags(serve)
    _add_metrics_flags(serve)
    _add_event_loop(serve)
    serve.add_argument("-v", "--verbose", action="store_true")
    add_config_flag(serve)
    serve.set_defaults(func=cmd_referee_serve)
