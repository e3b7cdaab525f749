"""``--config FILE.toml`` for the serve commands: the file's keys are the command's long
options (``metrics-port = 9100``, ``tls-cert = "/etc/scout/cert.pem"``), and any option also
given on the command line wins over the file (docs/deploy.md, "A config file").

The file sets the parser's defaults, then the command line is parsed again: every value from
the file goes through the option's own type and choices, so that a bad value in the file is
refused as it would be on the command line, naming the file and the key.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Sequence
from pathlib import Path

_PARSER = "_config_parser"


class ConfigError(ValueError):
    """The config file cannot be read or does not fit the command."""


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` on ``parser`` (a serve command); `parse_with_config` reads it."""
    parser.add_argument("--config", metavar="FILE.toml",
                        help="read options from this TOML file (keys are the long options "
                             "without '--'); options given here override it")
    parser.set_defaults(**{_PARSER: parser})


def parse_with_config(parser: argparse.ArgumentParser,
                      argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with the defaults of the subcommand that took ``--config``
    read from its file first. A bad file exits with status 2 and one line, like a bad flag."""
    args = parser.parse_args(argv)
    path = getattr(args, "config", None)
    command: argparse.ArgumentParser | None = getattr(args, _PARSER, None)
    if not path or command is None:
        return args
    try:
        command.set_defaults(**config_defaults(command, Path(path)))
    except ConfigError as exc:
        command.error(f"--config {path}: {exc}")
    return parser.parse_args(argv)


def config_defaults(parser: argparse.ArgumentParser, path: Path) -> dict[str, object]:
    """The defaults ``path`` gives ``parser``'s options, checked and converted."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("no such file") from None
    except IsADirectoryError:
        raise ConfigError("is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot be read ({exc.__class__.__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not TOML: {exc}") from None
    actions = {option[2:]: action for action in parser._actions
               for option in action.option_strings
               if option.startswith("--") and action.dest not in ("help", "config")}
    values: dict[str, object] = {}
    for key, value in data.items():
        action = actions.get(key.replace("_", "-"))
        if action is None:
            raise ConfigError(f"unknown key {key[:40]!r} (the keys are {parser.prog}'s long "
                              "options, e.g. port = 50051; see --help)")
        values[action.dest] = _convert(key, action, value)
    return values


def _convert(key: str, action: argparse.Action, value: object) -> object:
    if action.nargs == 0:  # a switch: --verbose, --no-hosting (true: as if given)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: true or false, not {_shown(value)}")
        return value if action.const is not False else not value
    if isinstance(action, argparse._AppendAction):
        if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
            raise ConfigError(f"{key}: a list of values, not {_shown(value)}")
        return [_scalar(key, action, item) for item in value]
    return _scalar(key, action, value)


def _scalar(key: str, action: argparse.Action, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{key}: a string or a number, not {_shown(value)}")
    text = str(value)
    convert = action.type if callable(action.type) else str
    try:
        converted = convert(text)
    except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
        detail = str(exc) if isinstance(exc, argparse.ArgumentTypeError) else \
            f"not a valid value: {text[:40]!r}"
        raise ConfigError(f"{key}: {detail}") from None
    if action.choices is not None and converted not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ConfigError(f"{key}: {text[:40]!r} is not one of {choices}")
    return converted


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 42 else text[:40] + "..."
