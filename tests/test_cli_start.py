"""`scout-arena` starts without importing what the command does not use (it took 1.2-1.7 s
for `--help`; bench/cli_start.py measures it): only the chosen subcommand's parser is built,
and `--help` lists the others from `COMMANDS`, which must say what their parsers say."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from scout_arena.cli import COMMANDS, build_parser

HEAVY = ("grpc", "sqlalchemy", "scout_client.runner", "scout_arena.server.referee", "rich")


def subcommand_helps(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {action.dest: action.help for action in sub._choices_actions}


def test_the_listed_help_is_each_parsers_own() -> None:
    full = subcommand_helps(build_parser())
    listed = subcommand_helps(build_parser(full=set()))
    assert listed == full
    assert set(full) == {name for helps, _ in COMMANDS for name in helps}


@pytest.mark.parametrize("argv", [["--help"], ["ladder", "--help"], ["play", "--help"],
                                  ["deal", "--players", "2"]])
def test_small_commands_import_neither_grpc_nor_the_database(argv: list[str]) -> None:
    code = ("import sys\nfrom scout_arena.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED []"


def test_an_unknown_command_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    from scout_arena.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["tournamnet"])
    assert exited.value.code == 2
    assert "invalid choice: 'tournamnet'" in capsys.readouterr().err
