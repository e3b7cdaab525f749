"""``scout-arena play``: Python bots in this process on the engine, one match shown move by
move or ``--games N`` summed up: the quickest way to try a bot before any referee, tournament
or ladder. Kept out of ``cli.py`` so that the command line starts without the engine."""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scout_client import Bot

__all__ = ["add_play_parser", "cmd_play"]

_BOT_HELP = ("bot for the next seat: random, greedy, search, search:KEY=VALUE,... (the search "
             "bot's options, e.g. search:iterations=400,observe=false), module:Class or "
             "file.py:Class (repeat per seat; one bot fills every seat)")


@dataclass
class _Tally:
    """One bot's results over the games, by the name it was given on the command line."""

    scores: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    wins: float = 0.0

    def row(self, name: str) -> list[str]:
        games = len(self.scores)
        mean = statistics.fmean(self.scores)
        half = 1.96 * statistics.stdev(self.scores) / math.sqrt(games) if games > 1 else math.inf
        score = f"{mean:+.2f}" + (f" ± {half:.2f}" if math.isfinite(half) else "")
        return [name, str(games), score, f"{100 * self.wins / games:.1f}",
                f"{statistics.fmean(self.ranks):.2f}"]


def _make(spec: str, seed: int, args: argparse.Namespace) -> Bot:
    """The bot a --bot names; ``search`` takes --think-ms / --iterations, or its options in
    the spec as the benches name them (``search:KEY=VALUE,...``: a module:Class has no ``=``)."""
    from scout_client.cli import BotSpecError, load_bot

    from .local import BUNDLED_BOTS, bot_from_spec
    from .search import SearchBot

    if spec == "search":
        return SearchBot(seed, think_ms=args.think_ms, iterations=args.iterations)
    if spec in BUNDLED_BOTS:
        return BUNDLED_BOTS[spec](seed)
    name, _, options = spec.partition(":")
    if name in BUNDLED_BOTS and "=" in options:
        try:
            return bot_from_spec(spec, seed)
        except (TypeError, ValueError) as exc:
            raise BotSpecError(str(exc)) from None
    return load_bot(spec, seed=seed)


def _labels(specs: list[str]) -> list[str]:
    """Seat labels for the summary: the spec, numbered when a spec holds several seats."""
    counts = {spec: specs.count(spec) for spec in specs}
    seen: dict[str, int] = {}
    labels = []
    for spec in specs:
        seen[spec] = seen.get(spec, 0) + 1
        labels.append(spec if counts[spec] == 1 else f"{spec} #{seen[spec]}")
    return labels


def cmd_play(args: argparse.Namespace) -> int:
    from scout_client.cli import BotSpecError
    from scout_rules import rank_scores

    from .local import play_match
    from .tournament.config import deal_seed

    def fail(message: str) -> int:
        print(f"scout-arena play: error: {message}", file=sys.stderr)
        return 2

    specs = args.bot or ["random"] * args.players
    if len(specs) == 1:
        specs = specs * args.players
    if len(specs) != args.players:
        return fail(f"{len(specs)} bots for {args.players} players")
    if args.games < 1:
        return fail("--games is at least 1")
    if args.think_ms is not None and args.iterations is not None:
        return fail("give --think-ms or --iterations, not both")
    if (args.think_ms is not None or args.iterations is not None) and "search" not in specs:
        if any(spec.startswith("search:") for spec in specs):
            return fail("--think-ms and --iterations apply to a bare 'search'; with options in "
                        "the spec, give them there too (search:think_ms=50,...)")
        return fail("--think-ms and --iterations are the search bot's options")
    if args.record and args.games > 1:
        return fail("--record writes one match: leave out --games, or --record")
    if args.record:
        folder = Path(args.record).resolve().parent
        if not folder.is_dir():
            return fail(f"--record {args.record[:100]!r}: folder {str(folder)[:100]!r} "
                        "does not exist")
        if Path(args.record).is_dir():
            return fail(f"--record {args.record[:100]!r} is a folder, not a file")
    try:
        bots = [_make(spec, args.seed + seat, args) for seat, spec in enumerate(specs)]
    except BotSpecError as exc:
        return fail(str(exc))
    if args.games == 1:
        return _one_match(args, bots, specs)
    labels = _labels(specs)
    tallies = {label: _Tally() for label in labels}
    n = args.players
    for game in range(args.games):
        # Seats rotate from game to game, so that each bot holds every seat in turn.
        order = [(seat + game) % n for seat in range(n)]
        state = play_match([bots[i] for i in order], deal_seed(args.seed, game),
                           match_id=f"local-{args.seed}-{game}")
        totals = tuple(state.scores)
        ranks = rank_scores(totals)
        firsts = ranks.count(1)
        for seat, index in enumerate(order):
            tally = tallies[labels[index]]
            tally.scores.append(totals[seat])
            tally.ranks.append(ranks[seat])
            tally.wins += 1 / firsts if ranks[seat] == 1 else 0.0
    if not args.quiet:
        _print_summary(args, tallies)
    return 0


def _one_match(args: argparse.Namespace, bots: list[Bot], specs: list[str]) -> int:
    from .local import play_match
    from .record import build_record, dump_record, format_match

    state = play_match(bots, args.seed)
    record = build_record(state, specs)
    if args.record:
        dump_record(record, args.record)
    if not args.quiet:
        print(format_match(record))
    return 0


def _print_summary(args: argparse.Namespace, tallies: dict[str, _Tally]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.games} games, {args.players} players, seed {args.seed} "
                        "(seats rotate from game to game)")
    for column in ("bot", "games", "mean score (95% CI)", "win %", "mean rank"):
        table.add_column(column, justify="left" if column == "bot" else "right")
    ordered = sorted(tallies.items(), key=lambda item: -statistics.fmean(item[1].scores))
    for name, tally in ordered:
        table.add_row(*tally.row(name))
    console = Console() if sys.stdout.isatty() else Console(width=140)
    console.print(table)


def add_play_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``play`` to the ``scout-arena`` subcommands."""
    from .tournament_cli import seed_arg

    play = sub.add_parser("play", help="play Python bots in this process: one match move by "
                          "move, or --games N summed up")
    play.add_argument("--players", type=int, choices=range(2, 6), default=4, metavar="N")
    play.add_argument("--seed", type=seed_arg, default=1)
    play.add_argument("--bot", action="append", metavar="BOT", help=_BOT_HELP)
    play.add_argument("--games", type=int, default=1, metavar="N",
                      help="play N matches (seats rotating) and print a summary per bot")
    play.add_argument("--think-ms", type=int, metavar="MS",
                      help="search bots: time per decision (default 200)")
    play.add_argument("--iterations", type=int, metavar="N",
                      help="search bots: a fixed number of iterations per decision instead "
                           "(reproducible)")
    play.add_argument("--record", metavar="FILE", help="write the match record here")
    play.add_argument("--quiet", action="store_true", help="print nothing")
    play.set_defaults(func=cmd_play)
