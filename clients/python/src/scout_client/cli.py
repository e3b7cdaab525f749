"""`scout-bot run SPEC`: play a bot on a referee from the command line.

SPEC names the bot: `random`, `greedy`, `module.path:ClassName` or `path/to/file.py:ClassName`.
The address and token come from flags or, as in every starter kit and the tournament runner,
from SCOUT_ADDRESS, SCOUT_TOKEN, SCOUT_TLS=1 and SCOUT_CA_CERT; `--public-events` (or
SCOUT_PUBLIC_EVENTS=1) asks for the full stream instead of a lean one. `add_bot_run_arguments`
and `run_from_args` let the server's `scout-arena bot run` offer the very same command.

Exit status: 0 after a clean stop (a signal, --max-matches, or the referee's Goodbye without a
reconnect), 1 when the referee rejects the bot, 2 for a usage problem (a missing address or
token, a token gRPC cannot send, a bad SPEC or option).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .bot import Bot
from .bots import GreedyBot, RandomBot
from .runner import (
    DEFAULT_SAFETY_MARGIN_MS,
    InvalidToken,
    ScoutClientError,
    run,
    validate_token,
)

__all__ = [
    "BUNDLED_BOTS",
    "BotSpecError",
    "add_bot_run_arguments",
    "load_bot",
    "main",
    "run_from_args",
]

log = logging.getLogger("scout_client")

BUNDLED_BOTS: dict[str, Callable[..., Bot]] = {"random": RandomBot, "greedy": GreedyBot}

_SPEC_HELP = "random, greedy, module.path:ClassName or path/to/file.py:ClassName"


class BotSpecError(ValueError):
    """A SPEC that names no loadable Bot."""


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise BotSpecError(f"no such file: {path}")
    # The bot's own directory goes first on the path so that it can import its helpers.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"scout_bot_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BotSpecError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


def _import(target: str) -> ModuleType:
    """``module.path`` as ``python -m`` would find it: the current directory is searched too
    (after the installed packages, so that a stray file there shadows nothing)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as error:
        # Only a missing target is the SPEC's fault; a missing import inside it is the bot's.
        if error.name is not None and (target == error.name or target.startswith(error.name
                                                                                 + ".")):
            first = target.split(".")[0]
            raise BotSpecError(
                f"no module named {target!r}: looked in the current directory ({cwd}) and "
                f"the installed packages; for a file elsewhere, give its path, as in "
                f"path/to/{first}.py:ClassName") from None
        raise


def _accepts_seed(factory: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "seed" or p.kind is p.VAR_KEYWORD for p in parameters)


def load_bot(spec: str, *, seed: int | None = None) -> Bot:
    """The Bot a SPEC names, constructed with `seed=` when given and its constructor takes one.
    A SPEC may also name a ready Bot instance or a function returning one."""
    factory: object
    if spec in BUNDLED_BOTS:
        factory = BUNDLED_BOTS[spec]
    else:
        target, colon, attribute = spec.rpartition(":")
        if not colon or not target or not attribute:
            raise BotSpecError(f"bad bot spec {spec!r}; use {_SPEC_HELP}")
        is_file = target.endswith(".py") or "/" in target or os.sep in target
        module = _load_file(Path(target)) if is_file else _import(target)
        try:
            factory = getattr(module, attribute)
        except AttributeError:
            raise BotSpecError(f"{target} has no {attribute!r}") from None
    if isinstance(factory, Bot):
        return factory
    if not callable(factory):
        raise BotSpecError(f"{spec} is neither a Bot class nor a function returning a Bot")
    if inspect.isclass(factory) and not issubclass(factory, Bot):
        raise BotSpecError(f"{spec} is a class, but not a subclass of scout_client.Bot")
    bot = factory(seed=seed) if seed is not None and _accepts_seed(factory) else factory()
    if not isinstance(bot, Bot):
        raise BotSpecError(f"{spec} gave {type(bot).__name__}, not a scout_client.Bot subclass")
    return bot


def add_bot_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `SPEC` and the connection options to a (sub)parser; pair with `run_from_args`."""
    parser.add_argument("spec", metavar="SPEC", help=f"the bot: {_SPEC_HELP}")
    parser.add_argument("--address", metavar="HOST:PORT",
                        help="the referee: HOST:PORT, or unix:/PATH for a Unix domain socket "
                             "(default: $SCOUT_ADDRESS)")
    parser.add_argument("--token", help="the bot's token (default: $SCOUT_TOKEN)")
    parser.add_argument("--tls", action="store_true",
                        help="connect with TLS (also SCOUT_TLS=1; implied by a certificate)")
    parser.add_argument("--ca-cert", metavar="FILE",
                        help="PEM of the CA to trust (default: $SCOUT_CA_CERT)")
    parser.add_argument("--client-cert", metavar="FILE", help="PEM client certificate")
    parser.add_argument("--client-key", metavar="FILE", help="PEM key of the client certificate")
    parser.add_argument("--max-concurrent", metavar="N", type=int,
                        default=int(os.environ.get("SCOUT_CONCURRENCY") or 8),
                        help="matches to play at once (default: $SCOUT_CONCURRENCY or 8)")
    parser.add_argument("--max-matches", metavar="N", type=int,
                        help="stop after this many matches have ended (default: never)")
    parser.add_argument("--seed", metavar="S", type=int,
                        help="seed for bots that take one (random)")
    parser.add_argument("--safety-margin-ms", metavar="MS", type=int,
                        default=DEFAULT_SAFETY_MARGIN_MS,
                        help="answer with the fallback this long before the referee's limit "
                             f"(default: {DEFAULT_SAFETY_MARGIN_MS})")
    parser.add_argument("--no-time-bank", action="store_true",
                        help="never draw on the time bank: fall back at the decision deadline")
    parser.add_argument("--public-events", action="store_true",
                        help="ask for every PublicEvent and ACCEPTED result (also "
                             "SCOUT_PUBLIC_EVENTS=1); default: a lean stream unless the bot "
                             "overrides on_event")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more (-v: debug)")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _fail(message: str, code: int) -> int:
    print(f"scout-bot: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def _has_port(address: str) -> bool:
    """Whether a gRPC target names its port (else it would be retried for ever on 443)."""
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)


def run_from_args(args: argparse.Namespace, bot: Bot | None = None) -> int:
    """Run the bot the parsed arguments describe. Returns the exit code: 0 after a clean stop
    (signal, --max-matches, or a Goodbye without a reconnect), 1 when the referee rejects the
    bot, 2 for a usage problem (an unusable token included). ``bot``: a bot the caller built
    (a host program's own bundled bots), played instead of loading SPEC."""
    logging.basicConfig(  # does nothing when the host program configured logging already
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    address = args.address or os.environ.get("SCOUT_ADDRESS", "")
    token = args.token or os.environ.get("SCOUT_TOKEN", "")
    if not address:
        return _fail("no referee address: pass --address HOST:PORT or set SCOUT_ADDRESS", 2)
    if not _has_port(address):
        return _fail(f"the referee address {address[:60]!r} names no port: HOST:PORT (or "
                     "unix:/path)", 2)
    if not token:
        return _fail("no bot token: pass --token or set SCOUT_TOKEN", 2)
    try:
        validate_token(token)
    except InvalidToken as error:
        return _fail(f"{error} (the token came from {'--token' if args.token else 'SCOUT_TOKEN'})",
                     2)
    ca_cert = args.ca_cert or os.environ.get("SCOUT_CA_CERT") or None
    tls = bool(args.tls or _env_flag("SCOUT_TLS") or ca_cert or args.client_cert)
    if bot is None:
        try:
            bot = load_bot(args.spec, seed=args.seed)
        except BotSpecError as error:
            return _fail(str(error), 2)
    try:
        played = run(
            bot,
            address,
            token,
            tls=tls,
            ca_cert=ca_cert,
            client_cert=args.client_cert,
            client_key=args.client_key,
            max_concurrent_matches=args.max_concurrent,
            max_matches=args.max_matches,
            safety_margin_ms=args.safety_margin_ms,
            use_time_bank=not args.no_time_bank,
            public_events=True if getattr(args, "public_events", False)
            or _env_flag("SCOUT_PUBLIC_EVENTS") else None,
        )
    except InvalidToken as error:
        return _fail(str(error), 2)
    except ScoutClientError as error:
        return _fail(str(error), 1)
    except (ValueError, OSError) as error:  # bad option values, unreadable certificate files
        return _fail(str(error), 2)
    log.info("stopped after %d match(es)", played)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scout-bot", description="Play a SCOUT bot on a "
                                     "Scout Arena referee.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_bot_run_arguments(commands.add_parser("run", help="connect a bot and play"))
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
