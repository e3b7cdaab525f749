"""`scout-arena play`: a bot author's own classes, several games summed up, the search bot's
options; the first thing to try before any referee."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scout_arena.cli import main

MY_BOT = """\
from scout_client import Action, Bot, Observation

class MyBot(Bot):
    name = "mybot"

    def act(self, observation: Observation) -> Action:
        if observation.legal_shows:
            return max(observation.legal_shows, key=lambda s: s.length)
        return observation.legal_scouts[0]
"""


@pytest.fixture
def bot_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "play_cli_bot.py").write_text(MY_BOT)
    yield tmp_path
    for name in ("play_cli_bot", "scout_bot_play_cli_bot"):
        sys.modules.pop(name, None)


def summary_rows(out: str) -> dict[str, list[str]]:
    """The summary table's rows by bot: the cells between the box-drawing bars."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 5 and cells[1].isdigit():
            rows[cells[0]] = cells[1:]
    return rows


def test_play_takes_file_and_module_classes_and_sums_up_games(
        bot_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "--bot", "play_cli_bot.py:MyBot", "--bot", "play_cli_bot:MyBot",
                 "--bot", "greedy", "--players", "3", "--games", "6"]) == 0
    rows = summary_rows(capsys.readouterr().out)
    assert set(rows) == {"play_cli_bot.py:MyBot", "play_cli_bot:MyBot", "greedy"}
    assert all(row[0] == "6" for row in rows.values())
    wins = sum(float(row[2]) for row in rows.values())
    assert wins == pytest.approx(100.0, abs=0.2)  # shared firsts split


def test_a_spec_holding_several_seats_is_numbered(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "--bot", "random", "--players", "2", "--games", "2"]) == 0
    assert set(summary_rows(capsys.readouterr().out)) == {"random #1", "random #2"}


def test_search_takes_iterations_and_reproduces(tmp_path: Path) -> None:
    records = []
    for name in ("a.json", "b.json"):
        path = tmp_path / name
        assert main(["play", "--bot", "search", "--bot", "random", "--players", "2",
                     "--iterations", "20", "--seed", "5", "--quiet", "--record",
                     str(path)]) == 0
        records.append(json.loads(path.read_text()))
    assert records[0] == records[1]


def test_search_takes_its_options_in_the_spec_as_the_benches_name_them(tmp_path: Path) -> None:
    """``search:iterations=20`` is the bot ``--iterations 20`` makes; other options ride along."""
    rounds = []
    for bot in (["search:iterations=20"], ["search", "--iterations", "20"],
                ["search:iterations=20,sample_tries=1"]):
        path = tmp_path / "match.json"
        assert main(["play", "--bot", *bot, "--bot", "random", "--players", "2", "--seed", "5",
                     "--quiet", "--record", str(path)]) == 0
        rounds.append(json.loads(path.read_text())["rounds"])
    assert rounds[0] == rounds[1]
    assert rounds[2] != rounds[0]  # uniform fills search other determinizations


@pytest.mark.parametrize(("argv", "message"), [
    (["--bot", "search:iterations=x"], "iterations is a number"),
    (["--bot", "search:nope=1"], "no option 'nope'"),
    (["--bot", "greedy", "--think-ms", "50"], "the search bot's options"),
    (["--bot", "search:iterations=5", "--think-ms", "50"], "give them there too"),
    (["--bot", "search", "--think-ms", "50", "--iterations", "5"], "not both"),
    (["--bot", "no_such_play_module:Bot"], "no module named"),
    (["--bot", "greedy", "--games", "2", "--record", "x.json"], "--record writes one match"),
    (["--bot", "greedy", "--bot", "random", "--bot", "greedy"], "3 bots for 4 players"),
])
def test_bad_play_options_say_what_to_change(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", *argv]) == 2
    assert message in capsys.readouterr().err
