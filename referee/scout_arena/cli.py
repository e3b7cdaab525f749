"""The `scout-arena` command and its subcommands.

Each subcommand imports what it needs when it runs, and only the chosen subcommand's parser is
built (`build_parser`): `scout-arena --help` and the small commands answer at once, where
importing the referee, gRPC and SQLAlchemy first took more than a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from .clierrors import (
    OneLineParser,
    guarded_main,
    port_number,
)
from .server.configfile import parse_with_config
from .tournament_cli import seed_arg
from .train_cli import add_train_parser

if TYPE_CHECKING:
    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def cmd_replay(args: argparse.Namespace) -> int:
    from .record import RecordError, format_match, read_record_json, record_from_json, replay

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
    from .referee_cli import add_referee_parser

    add_referee_parser(sub)


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
