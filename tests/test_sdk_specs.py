"""How the SDK loads a bot SPEC: a bundled name, a module, or a file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from scout_client import (
    GreedyBot,
    RandomBot,
)
from scout_client.cli import BotSpecError, load_bot


def test_load_bundled_and_module_specs() -> None:
    bot = load_bot("random", seed=3)
    assert isinstance(bot, RandomBot) and bot.seed == 3
    assert isinstance(load_bot("greedy", seed=3), GreedyBot)
    assert isinstance(load_bot("scout_client.bots:GreedyBot"), GreedyBot)


def test_load_file_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    (tmp_path / "sdk_test_helper.py").write_text("FAVOURITE = 1\n")
    (tmp_path / "my_bot.py").write_text(
        "from scout_client import Bot\n"
        "from sdk_test_helper import FAVOURITE\n"
        "class MyBot(Bot):\n"
        "    name = 'mine'\n"
        "    def __init__(self, seed=None):\n"
        "        self.seed = seed\n"
        "    def act(self, observation):\n"
        "        return observation.fallback()\n"
    )
    bot = load_bot(f"{tmp_path / 'my_bot.py'}:MyBot", seed=9)
    assert bot.name == "mine" and bot.seed == 9  # type: ignore[attr-defined]


def test_module_spec_resolves_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot run mybot:MyBot` in the bot's own folder: a console script's sys.path does not
    hold the current directory, yet Python users expect `import mybot` to work there."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sdk_cwd_bot.py").write_text(
        "from scout_client import Bot\n"
        "class MyBot(Bot):\n"
        "    name = 'cwd'\n"
        "    def act(self, observation):\n"
        "        return observation.fallback()\n"
    )
    assert load_bot("sdk_cwd_bot:MyBot").name == "cwd"


def test_missing_module_error_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BotSpecError) as caught:
        load_bot("sdk_absent_bot:MyBot")
    message = str(caught.value)
    assert str(tmp_path) in message and "current directory" in message
    assert "sdk_absent_bot.py:ClassName" in message


@pytest.mark.parametrize(
    "spec",
    [
        "nope",
        "scout_client.bots:Nope",
        "sdk_no_such_module:Bot",
        "missing/bot.py:Bot",
        "scout_client.types:Card",
        "scout_client.bots:",
    ],
)
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(BotSpecError):
        load_bot(spec)
