"""``scout-arena tournament`` and ``scout-arena sprt``: bot programs played against each other
on this machine, on local workers or on a Ray cluster."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from .server.flags import add_time_control_flags
from .workerspawn import Workers, start_workers, stop_unused


def seed_arg(text: str) -> int:
    """A seed on the command line: an unsigned 64-bit integer, in any base `int` reads."""
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError("a seed is an unsigned 64-bit integer")
    return value


def _bot_spec(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not name or not command:
        raise argparse.ArgumentTypeError(f"--bot takes NAME=COMMAND, got {text!r}")
    return name, command


def cmd_tournament(args: argparse.Namespace) -> int:
    if args.nodes is not None and args.ray is not None:
        print("error: --nodes and --ray do not go together", file=sys.stderr)
        return 2
    if (args.nodes is not None and args.nodes < 1) or \
            (args.chunk_size is not None and args.chunk_size < 1):
        print("error: --nodes and --chunk-size are at least 1", file=sys.stderr)
        return 2
    return asyncio.run(_tournament(args))


async def _tournament(args: argparse.Namespace) -> int:
    """The workers of ``--nodes`` start first: their start-up runs beside this one's."""
    workers = await start_workers(args.nodes) if args.nodes is not None else {}
    try:
        return await _run_tournament(args, workers)
    finally:
        await stop_unused(workers)


async def _run_tournament(args: argparse.Namespace, workers: Workers) -> int:
    from rich.console import Console

    from .tournament import (
        CONFIG_FILE,
        BotSpec,
        Tournament,
        TournamentConfig,
        TournamentDirError,
        load_config_file,
        render_summary,
    )

    console = Console() if sys.stdout.isatty() else Console(width=140)
    if args.resume:
        out = Path(args.resume)
        config = TournamentConfig.from_json(json.loads((out / CONFIG_FILE).read_text()))
    else:
        values: dict[str, object] = {}
        if args.config:
            values.update(load_config_file(Path(args.config)))
            values["bots"] = tuple(BotSpec(b["name"], b["command"])
                                   for b in values.get("bots", []))  # type: ignore[attr-defined]
        if args.bot:
            values["bots"] = tuple(BotSpec(n, c) for n, c in args.bot)
        for key in ("players", "games", "concurrency", "seed", "gauntlet", "decision_ms",
                    "time_bank_ms", "connect_timeout_s"):
            value = getattr(args, key)
            if value is not None:
                values[key] = value
        if args.no_duplicate:
            values["duplicate"] = False
        if not values.get("bots"):
            print("error: name the bots with --bot NAME=COMMAND or --config FILE",
                  file=sys.stderr)
            return 2
        config = TournamentConfig(**values)  # type: ignore[arg-type]
        out = Path(args.out)
    try:
        config.validate()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tournament = Tournament(config, out, console=console, show_progress=not args.no_progress,
                            nodes=args.nodes, ray_address=args.ray, chunk_size=args.chunk_size,
                            ray_working_dir=Path(args.ray_working_dir).resolve()
                            if args.ray_working_dir else None, keep_going=args.keep_going,
                            workers=workers)
    try:
        summary = await tournament.run()
    except TournamentDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if summary.matches_finished or not summary.error:  # else: the error says it all
        render_summary(summary, console)
        console.print(f"records, logs and summary.json in {out}")
    if summary.error:
        print(f"error: {summary.error}", file=sys.stderr)
        return 1
    return 130 if summary.interrupted else 0


def cmd_sprt(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .sprt import DEFAULT_H1, SprtConfig, SprtError, render_result, run_sprt
    from .tournament import TournamentDirError

    console = Console() if sys.stdout.isatty() else Console(width=140)
    if (args.nodes is not None or args.ray is not None) and args.in_process:
        print("error: --in-process plays on this machine; it does not go with --nodes/--ray",
              file=sys.stderr)
        return 2
    config = SprtConfig(
        new=args.new, base=args.base, field=tuple(args.field or ()), players=args.players,
        metric=args.metric, h0=args.h0,
        h1=args.h1 if args.h1 is not None else DEFAULT_H1[args.metric], alpha=args.alpha,
        beta=args.beta, max_games=args.max_games, seed=args.seed, concurrency=args.concurrency,
        decision_ms=args.decision_ms, time_bank_ms=args.time_bank_ms,
        connect_timeout_s=args.connect_timeout_s)
    try:
        config.validate()
        summary = run_sprt(config, Path(args.out), in_process=args.in_process,
                           nodes=args.nodes, ray_address=args.ray, console=console,
                           show_progress=not args.no_progress)
    except (ValueError, SprtError, TournamentDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    render_result(summary, console, Path(args.out))
    return 130 if summary["interrupted"] else 0


def add_tournament_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``tournament`` and ``sprt`` to the ``scout-arena`` subcommands."""
    tour = sub.add_parser("tournament", help="bot programs against each other on this machine")
    tour.add_argument("--bot", action="append", type=_bot_spec, metavar="NAME=COMMAND",
                      help="a bot program (repeat); random, greedy, search (the bundled bots) and "
                      "file.py:Class or module:Class are played by 'bot run', options after "
                      "them: 'search --iterations 200'")
    tour.add_argument("--config", metavar="FILE", help="TOML/JSON with the same keys, bots as "
                      "[[bot]] name = ..., command = ...")
    tour.add_argument("--players", type=int, choices=range(2, 6), metavar="N")
    tour.add_argument("--games", type=int, metavar="G", help="deals per table lineup")
    tour.add_argument("--concurrency", type=int, metavar="K", help="matches at once")
    tour.add_argument("--seed", type=seed_arg)
    tour.add_argument("--gauntlet", metavar="NAME", help="NAME plays every table of the field")
    tour.add_argument("--no-duplicate", action="store_true",
                      help="play each deal once instead of once per seat rotation")
    add_time_control_flags(tour, defaults=False)
    tour.add_argument("--connect-timeout", dest="connect_timeout_s", type=float)
    tour.add_argument("--out", default="tournament-out", metavar="DIR")
    tour.add_argument("--resume", metavar="DIR", help="continue an interrupted tournament")
    tour.add_argument("--no-progress", action="store_true")
    tour.add_argument("--keep-going", action="store_true",
                      help="play on when a bot cannot start (its seats by the fallback) "
                           "instead of stopping before the first match")
    tour.add_argument("--nodes", type=int, metavar="N", help="play on N local worker processes, "
                      "each with its own referee and bot programs")
    tour.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                      help="play on a Ray cluster (default: RAY_ADDRESS or the local one); "
                      "needs scout-arena[ray]")
    tour.add_argument("--chunk-size", type=int, metavar="M",
                      help="matches per chunk of --nodes/--ray (default: smaller as the "
                      "schedule runs out for --nodes, about two per CPU for --ray; at most 50)")
    tour.add_argument("--ray-working-dir", metavar="DIR",
                      help="ship DIR to every Ray node; bot commands run inside it")
    tour.set_defaults(func=cmd_tournament)

    sprt = sub.add_parser(
        "sprt", help="is NEW better than BASE? duplicate deals until a sequential test decides",
        formatter_class=argparse.RawDescriptionHelpFormatter, description="""\
Plays NEW against BASE on duplicate deals: for every deal and seat rotation, once with NEW and
once with BASE in the tested seat, the other seats held by the same --field bots (two players
without --field: NEW-BASE and BASE-NEW). After every deal a generalized SPRT (fishtest's normal
approximation, cutechess-cli/fastchess bounds) on the paired differences says go on, H0 or H1:

  score   (default) H0/H1 are NEW's match score minus BASE's in the same seat, in points
          (--h0 0 --h1 1: "one point per game better")
  winrate H0/H1 are NEW's share of first places minus BASE's (0.05 = 5 points of win rate;
          with two players, NEW's match score is 0.5 + that / 2)

Writes sprt.json (the LLR after every deal, the estimate and its 95% interval) and llr.png to
--out. Commands follow the launch convention (random, greedy, search and module:Class or
file.py:Class are played by `scout-arena bot run`); with --in-process they are Python bots in
this process instead (random, greedy, search, module:Class, file.py:Class).""")
    sprt.add_argument("--new", required=True, metavar="CMD", help="the version under test")
    sprt.add_argument("--base", required=True, metavar="CMD", help="the version to beat")
    sprt.add_argument("--field", action="append", metavar="CMD",
                      help="a bot for the other seats (repeat; default with N > 2: BASE)")
    sprt.add_argument("--players", type=int, choices=range(2, 6), default=2, metavar="N")
    sprt.add_argument("--metric", choices=("score", "winrate"), default="score")
    sprt.add_argument("--h0", type=float, default=0.0, help="H0's difference (default 0)")
    sprt.add_argument("--h1", type=float, help="H1's difference (default 1 point, or 0.05)")
    sprt.add_argument("--alpha", type=float, default=0.05, help="false H1 rate (default 0.05)")
    sprt.add_argument("--beta", type=float, default=0.05, help="false H0 rate (default 0.05)")
    sprt.add_argument("--max-games", type=int, default=10_000, metavar="G",
                      help="stop undecided after this many games (default 10000)")
    sprt.add_argument("--seed", type=seed_arg, default=1)
    sprt.add_argument("--concurrency", type=int, default=2, metavar="K", help="games at once")
    sprt.add_argument("--in-process", action="store_true",
                      help="Python bot classes on the engine: no subprocess, no network")
    sprt.add_argument("--nodes", type=int, metavar="N",
                      help="play on N local worker nodes (scout_arena.tournament.distributed)")
    sprt.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                      help="play on a Ray cluster (default address: auto)")
    add_time_control_flags(sprt)
    sprt.add_argument("--connect-timeout", dest="connect_timeout_s", type=float, default=30.0)
    sprt.add_argument("--out", default="sprt-out", metavar="DIR")
    sprt.add_argument("--no-progress", action="store_true")
    sprt.set_defaults(func=cmd_sprt)
