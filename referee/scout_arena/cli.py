"""The `scout-arena` command and its subcommands.

Each subcommand imports what it needs when it runs, and only the chosen subcommand's parser is
built (`build_parser`): `scout-arena --help` and the small commands answer at once, where
importing the referee, gRPC and SQLAlchemy first took more than a second.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import ssl
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from .clierrors import (
    CommandError,
    OneLineParser,
    guarded_main,
    host_port,
    nonnegative_int,
    port_number,
    seconds,
)
from .server.configfile import add_config_flag, parse_with_config
from .server.eventloop import EVENT_LOOPS
from .server.eventloop import run as run_on_loop
from .server.flags import (
    add_hosting_flags,
    add_metrics_access_flags,
    add_time_control_flags,
    add_tls_flags,
    metrics_access,
    positive_int,
    time_control,
    tls_config,
)
from .tournament_cli import seed_arg
from .train_cli import add_train_parser

if TYPE_CHECKING:
    from .hosting.node import NodeHosting
    from .record import MatchRecord
    from .server import Referee
    from .server.node import NodeConfig

    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _add_event_loop(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default=None,
                        help="asyncio event loop: stock asyncio (the default, or "
                             "$SCOUT_EVENT_LOOP), uvloop, or auto (uvloop when installed)")


def _add_metrics_flags(parser: argparse.ArgumentParser) -> None:
    """--metrics-port and --metrics-host: Prometheus metrics over HTTP (docs/deploy.md)."""
    parser.add_argument("--metrics-port", type=port_number, metavar="P",
                        help="serve Prometheus metrics on http://HOST:P/metrics (0 picks a "
                        "free port; default: no metrics server)")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                        help="interface of the metrics server (default 127.0.0.1)")
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
            f"{str(path)!r} is longer than a Unix socket path may be ({_UNIX_PATH_MAX} bytes)")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {str(path.parent)!r}")
    if path.exists() and not path.is_socket():
        raise argparse.ArgumentTypeError(f"{str(path)!r} exists and is not a socket")
    return path


def format_match(record: MatchRecord) -> str:
    """A readable move-by-move account of a record; replays it first (RecordError if bad)."""
    from .record import replay, seat_labels
    from .record.json_v1 import note_json

    result = replay(record)
    players = record.players
    labels = seat_labels(players)
    lines = [f"SCOUT, {record.num_players} players, seed {record.seed}"]
    lines += [f"  seat {seat}: {name}" for seat, name in enumerate(players)]
    for entry in record.rounds:
        index = entry.index
        lines.append(f"\nRound {index + 1} ({labels[entry.starting_seat]} starts)")
        for seat, hand in enumerate(entry.dealt_hands):
            rotated = " (rotated)" if entry.rotations[seat] else ""
            faces = " ".join(f"{card.face}/{card.other}" for card in hand)
            lines.append(f"  dealt to {labels[seat]}: {faces}{rotated}")
        lines += [f"  {step.number:3d}. {step.description}" for step in result.steps
                  if step.round_index == index]
        if entry.scores is not None and entry.end_reason is not None:
            exempt = entry.exempt_seat
            exempt_text = (f"; {labels[exempt]} exempt from the hand penalty"
                           if exempt is not None else "")
            lines.append(f"  round ends: {entry.end_reason.value.replace('_', ' ')}"
                         f"{exempt_text}")
            lines.append(f"  round scores: {list(entry.scores)}")
    for note in record.notes:
        lines.append(f"  note: {json.dumps(note_json(note))}")
    if record.finished and record.totals is not None and record.ranks is not None:
        lines.append("\nFinal standings")
        totals, ranks = record.totals, record.ranks
        for seat in sorted(range(len(players)), key=lambda s: ranks[s]):
            lines.append(f"  {ranks[seat]}. {labels[seat]:<12} {totals[seat]:+d}")
    return "\n".join(lines)


def cmd_replay(args: argparse.Namespace) -> int:
    from .record import RecordError, read_record_json, record_from_json, replay

    try:
        raw = read_record_json(args.file)
        replay(raw)
        if not args.quiet:
            print(format_match(record_from_json(raw)))
    except RecordError as exc:
        print(f"invalid record: {exc}", file=sys.stderr)
        return 1
    print(f"\n{args.file}: valid", file=sys.stderr)
    return 0


#: Starter-kit bots the demo adds when their build output exists (``make demo`` builds some).
DEMO_KITS = (
    ("go", "clients/go/bin/scout-bot", "{path}"),
    ("typescript", "clients/typescript/dist/main.js", "node {path}"),
    ("rust", "clients/rust/target/release/scout-bot", "{path}"),
    ("java", "clients/java/target/scout-bot.jar", "java -jar {path}"),
    ("cpp", "clients/cpp/build/scout-bot", "{path}"),
)


DEMO_MATCHES = 80


def cmd_demo(args: argparse.Namespace) -> int:
    """A small tournament among the bundled Python bots and every starter kit that is built."""
    import shlex

    from rich.console import Console

    from .tournament import BotSpec, Tournament, TournamentConfig, render_summary

    root = Path(args.root).resolve()
    bots = [BotSpec("python-greedy", "greedy"), BotSpec("python-random", "random")]
    for name, rel, template in DEMO_KITS:
        path = root / rel
        if path.exists():
            bots.append(BotSpec(name, template.format(path=shlex.quote(str(path)))))
    console = Console() if sys.stdout.isatty() else Console(width=140)
    players = min(4, len(bots))
    lineups = math.comb(len(bots), players)
    games = args.games or max(1, round(DEMO_MATCHES / (lineups * players)))
    console.print(f"Demo tournament: {', '.join(b.name for b in bots)}; {players}-player tables, "
                  f"{games} duplicate deal(s) per lineup, {lineups * games * players} matches")
    config = TournamentConfig(tuple(bots), players=players, games=games,
                              concurrency=args.concurrency, seed=args.seed)
    out = Path(args.out)
    if (out / "tournament.json").exists():
        shutil.rmtree(out)  # the demo's own scratch folder: start afresh every time
    summary = asyncio.run(Tournament(config, out, console=console, keep_going=True).run())
    render_summary(summary, console)
    first = summary.records[0] if summary.records else "records/<match>.json"
    console.print(f"records, logs and summary.json in {args.out}; replay one with "
                  f"`scout-arena replay {args.out}/{first}`")
    return 0


def cmd_deal(args: argparse.Namespace) -> int:
    from scout_rules import State

    state = State.new(args.players, args.seed)
    print(json.dumps([[[[c.face, c.other] for c in h] for h in r] for r in state.deals]))
    return 0


def _tokens(args: argparse.Namespace) -> dict[str, str]:
    tokens: dict[str, str] = {}
    if args.tokens:
        try:
            data = json.loads(Path(args.tokens).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not JSON"
            raise CommandError(f"--tokens {args.tokens[:100]!r}: {reason}") from None
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise CommandError(f"--tokens {args.tokens[:100]!r}: expected a JSON object "
                               "{bot name: token}")
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
        raise CommandError("--join needs the ladder's node token: --node-token or "
                           "SCOUT_NODE_TOKEN")
    credentials = None
    if args.ladder_ca or args.ladder_tls:
        ca = None
        if args.ladder_ca:
            try:
                ssl.create_default_context(cafile=args.ladder_ca)
                ca = Path(args.ladder_ca).read_bytes()
            except (OSError, ssl.SSLError) as exc:
                raise CommandError(f"--ladder-ca {args.ladder_ca[:100]!r}: not a readable PEM "
                                   f"CA certificate ({type(exc).__name__})") from None
        credentials = grpc.ssl_channel_credentials(root_certificates=ca)
    return NodeConfig(ladder=args.join, token=token, advertise=args.advertise or address,
                      capacity=args.capacity, name=args.node_name or "", bots_tls=bots_tls,
                      ladder_credentials=credentials)


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
            "this node cannot host bots: %s", support.reason)
        support = SandboxSupport(False, support.reason, support.cgroups)
    workdir = Path(args.hosting_dir) if args.hosting_dir else \
        Path(tempfile.mkdtemp(prefix="scout-node-"))
    return NodeHosting(referee, Sandbox(), workdir, support, args.hosted_data_mb * 2**20,
                       remove_workdir=not args.hosting_dir)


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
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
        referee = Referee(tokens, wire=ProtobufWire(), records_dir=records,
                          default_time_control=time_control(args),
                          reconnect_grace_s=args.reconnect_grace,
                          pass_budget_ms=args.pass_budget_ms)
        server = RefereeServer(referee, host=args.host, port=args.port,
                               admin_token=args.admin_token, tls=tls,
                               max_streams_per_connection=args.max_streams_per_connection,
                               max_streams_per_token=args.max_streams_per_token,
                               goodbye_retry_after_ms=args.goodbye_retry_ms, gc_policy=True)
        if args.unix_socket is not None:
            # Plaintext: who may connect is up to the socket file's permissions.
            unix_address = f"unix:{args.unix_socket}"
            if not server.server.add_insecure_port(unix_address):
                raise CommandError(f"--unix-socket: cannot listen on {unix_address}", 1)
        metrics: MetricsServer | None = None
        if args.metrics_port is not None:
            try:
                metrics = serve_metrics(referee.metrics, args.metrics_host, args.metrics_port,
                                        probes=server.health, access=access)
            except OSError as exc:
                raise CommandError(f"--metrics-port: cannot listen on {args.metrics_host}:"
                                   f"{args.metrics_port}: {exc.strerror or exc}", 1) from None
        ready = asyncio.Event()
        task = asyncio.create_task(serve_forever(server, args.drain_seconds, ready))
        await ready.wait()  # the server has started, and with it the GC policy (hardening)
        watch_gc_pauses(referee.metrics.gc_paused)
        print(f"referee listening on {server.address}", flush=True)
        if args.admin_token is None:  # after binding: the port, not 0, is named
            logging.getLogger("scout_arena.referee").warning(
                "no --admin-token: the Matches service is open to every client that reaches "
                "%s (anyone can create and watch matches and read records)", server.address)
        if args.unix_socket is not None:
            print(f"referee also listening on unix:{args.unix_socket}", flush=True)
        link_task = None
        hosting = None
        if args.join:
            hosting = node_hosting(args, referee)
            link = NodeLink(referee, node_config(args, server.address, tls is not None),
                            hosting)
            link_task = asyncio.create_task(link.run(), name="node link")

            async def attached() -> str | None:  # readiness: a node serves its ladder
                return None if link.attached.is_set() else f"not attached to {args.join}"

            server.health.watch("ladder", attached, NODE_CHECK_S)
            print(f"node of the ladder {args.join}", flush=True)
        if metrics is not None:
            print(f"metrics on {metrics.url}", flush=True)
        logging.getLogger("scout_arena.referee").info(
            "event loop: %s", type(asyncio.get_running_loop()).__module__.split(".")[0])
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


def cmd_bot_run(args: argparse.Namespace) -> int:
    from scout_client.cli import run_from_args

    bot = None
    if args.spec == "search":  # bundled here, not in the SDK (it needs the engine)
        from .search import SearchBot

        if args.think_ms is not None and args.iterations is not None:
            print("scout-arena: error: give --think-ms or --iterations, not both",
                  file=sys.stderr)
            return 2
        bot = SearchBot(seed=args.seed or 0, think_ms=args.think_ms, iterations=args.iterations)
    elif args.think_ms is not None or args.iterations is not None:
        print("scout-arena: error: --think-ms and --iterations are the search bot's options",
              file=sys.stderr)
        return 2
    status: int = run_from_args(args, bot)
    return status


def cmd_web(args: argparse.Namespace) -> int:
    import uvicorn

    from .web import TournamentSource, create_app

    app = create_app(TournamentSource(args.dir), title=f"Scout Arena tournament {args.dir}")
    print(f"serving {args.dir} on http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _add_replay(sub: _Subparsers) -> None:
    rep = sub.add_parser("replay", help="validate a match record and print it move by move")
    rep.add_argument("file")
    rep.add_argument("--quiet", action="store_true", help="only validate")
    rep.set_defaults(func=cmd_replay)


def _add_demo(sub: _Subparsers) -> None:
    demo = sub.add_parser("demo", help="a small tournament of the bundled bots and built kits")
    demo.add_argument("--seed", type=seed_arg, default=2026)
    demo.add_argument("--games", type=int, default=0,
                      help="deals per lineup (default: about 80 matches in all)")
    demo.add_argument("--concurrency", type=int, default=4)
    demo.add_argument("--out", default="demo-out")
    demo.add_argument("--root", default=".", help="repository root, where clients/ is")
    demo.set_defaults(func=cmd_demo)


def _add_referee(sub: _Subparsers) -> None:
    from .server.arena_service import MAX_STREAMS_PER_TOKEN
    from .server.listener import MAX_STREAMS_PER_CONNECTION
    from .server.turns import DEFAULT_PASS_BUDGET_MS

    referee = sub.add_parser("referee", help="the gRPC referee server")
    referee_sub = referee.add_subparsers(dest="referee_command", required=True)
    serve = referee_sub.add_parser("serve", help="serve the Arena and Matches services")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_number, default=50051, help="0 picks a free port")
    serve.add_argument("--unix-socket", type=_unix_socket, metavar="PATH",
                       help="also listen on this Unix domain socket (plaintext, next to "
                            "HOST:PORT); bots reach it with the address unix:PATH")
    serve.add_argument("--tokens", metavar="FILE", help="JSON object {bot name: token}")
    serve.add_argument("--bot-token", action="append", metavar="NAME=TOKEN")
    serve.add_argument("--admin-token", default=os.environ.get("SCOUT_REFEREE_ADMIN_TOKEN"),
                       help="token the Matches service requires (default: "
                            "$SCOUT_REFEREE_ADMIN_TOKEN)")
    serve.add_argument("--records", default="records", metavar="DIR",
                       help="where match records are written (default ./records)")
    add_time_control_flags(serve)
    serve.add_argument("--reconnect-grace", type=seconds, default=10.0, metavar="SECONDS")
    serve.add_argument("--drain-seconds", type=seconds, default=0.0,
                       help="on shutdown, let running matches finish this long")
    add_tls_flags(serve)
    serve.add_argument("--max-streams-per-connection", type=positive_int,
                       default=MAX_STREAMS_PER_CONNECTION, metavar="N",
                       help="HTTP/2 streams (calls) one connection may have open at once")
    serve.add_argument("--max-streams-per-token", type=positive_int,
                       default=MAX_STREAMS_PER_TOKEN,
                       metavar="N",
                       help="Play streams one bot token may have open at once")
    serve.add_argument("--pass-budget-ms", type=_pass_budget_ms, default=DEFAULT_PASS_BUDGET_MS,
                       metavar="MS",
                       help="how much of one event-loop pass match turns may take; the rest "
                            "wait for the next, so other calls are not held up (default "
                            f"{DEFAULT_PASS_BUDGET_MS:g}; docs/deploy.md#under-load)")
    serve.add_argument("--goodbye-retry-ms", type=nonnegative_int, default=2000, metavar="MS",
                       help="how long the Goodbye of a shutdown asks bots to wait before "
                            "they reconnect")
    node = serve.add_argument_group(
        "ladder node", "serve as one of a ladder's referee nodes (docs/deploy.md#nodes)")
    node.add_argument("--join", metavar="HOST:PORT", type=host_port,
                      help="register with the ladder there and host the matches it assigns")
    node.add_argument("--node-token", metavar="TOKEN",
                      help="the ladder's node token (default: $SCOUT_NODE_TOKEN)")
    node.add_argument("--advertise", metavar="HOST:PORT", type=host_port,
                      help="the address bots reach this node on (default: where it listens)")
    node.add_argument("--capacity", type=positive_int, default=100, metavar="N",
                      help="most ladder matches at once (default 100)")
    node.add_argument("--node-name", metavar="NAME", help="for the ladder's pages and logs")
    node.add_argument("--ladder-tls", action="store_true", help="reach the ladder over TLS")
    node.add_argument("--ladder-ca", metavar="PEM",
                      help="CA that signed the ladder's certificate (implies --ladder-tls)")
    add_hosting_flags(serve)
    _add_metrics_flags(serve)
    _add_event_loop(serve)
    serve.add_argument("-v", "--verbose", action="store_true")
    add_config_flag(serve)
    serve.set_defaults(func=cmd_referee_serve)


def _add_bot(sub: _Subparsers) -> None:
    from scout_client.cli import add_bot_run_arguments

    bot = sub.add_parser("bot", help="run a bot against a referee")
    bot_sub = bot.add_subparsers(dest="bot_command", required=True)
    bot_run = bot_sub.add_parser("run", help="connect a bot (random, greedy, search, "
                                 "module:Class, file.py:Class)")
    add_bot_run_arguments(bot_run)
    bot_run.add_argument("--think-ms", type=int, metavar="MS",
                         help="search bot: time per decision (default 200; capped by each "
                              "request's deadline)")
    bot_run.add_argument("--iterations", type=int, metavar="N",
                         help="search bot: a fixed number of iterations per decision instead")
    bot_run.set_defaults(func=cmd_bot_run)


def _add_web(sub: _Subparsers) -> None:
    web = sub.add_parser("web", help="serve the web pages of a tournament output directory")
    web.add_argument("dir", metavar="DIR", help="a tournament's --out directory")
    web.add_argument("--host", default="127.0.0.1")
    web.add_argument("--port", type=port_number, default=8000)
    web.set_defaults(func=cmd_web)


def _add_deal(sub: _Subparsers) -> None:
    deal = sub.add_parser("deal", help="print a seed's deal as JSON: deals[round][seat]")
    deal.add_argument("--players", type=int, choices=range(2, 6), default=4)
    deal.add_argument("--seed", type=seed_arg, default=1)
    deal.set_defaults(func=cmd_deal)


def _add_play(sub: _Subparsers) -> None:
    from .play_cli import add_play_parser

    add_play_parser(sub)


def _add_tournament(sub: _Subparsers) -> None:
    from .tournament_cli import add_tournament_parsers

    add_tournament_parsers(sub)


def _add_ladder(sub: _Subparsers) -> None:
    from scout_ladder.cli import add_ladder_parser

    add_ladder_parser(sub)


#: Every subcommand: the names an adder defines, their one-line help (what `scout-arena --help`
#: lists without building them; tests/test_cli_start.py holds it to the parsers' own), and the
#: adder.
COMMANDS: tuple[tuple[dict[str, str], Callable[[_Subparsers], None]], ...] = (
    ({"play": "play Python bots in this process: one match move by move, or --games N "
               "summed up"}, _add_play),
    ({"replay": "validate a match record and print it move by move"}, _add_replay),
    ({"demo": "a small tournament of the bundled bots and built kits"}, _add_demo),
    ({"referee": "the gRPC referee server"}, _add_referee),
    ({"bot": "run a bot against a referee"}, _add_bot),
    ({"tournament": "bot programs against each other on this machine",
      "sprt": "is NEW better than BASE? duplicate deals until a sequential test decides"},
     _add_tournament),
    ({"web": "serve the web pages of a tournament output directory"}, _add_web),
    ({"ladder": "the rating ladder: serve, register, standings"}, _add_ladder),
    ({"deal": "print a seed's deal as JSON: deals[round][seat]"}, _add_deal),
    ({"train": "train the search bot's value network by self-play"}, add_train_parser),
)


def build_parser(full: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line. ``full``: the subcommands whose parsers are built in full (None:
    all); the others are listed by name and help only, and building nothing else imports
    nothing else."""
    parser: argparse.ArgumentParser = OneLineParser(prog="scout-arena",
                                                    description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for helps, add in COMMANDS:
        if full is None or any(name in full for name in helps):
            add(sub)
        else:
            for name, text in helps.items():
                sub.add_parser(name, help=text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    args = parse_with_config(build_parser(full={command} if command else set()), words)
    names = [args.command, *(getattr(args, f"{args.command}_command", None) or "",)]
    return guarded_main(" ".join(w for w in names if w), lambda: int(args.func(args)))


if __name__ == "__main__":
    sys.exit(main())
