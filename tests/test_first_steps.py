"""The README's "Writing a bot in Python", run as a newcomer would: the bot saved from the
README's own block, each command of the section run word for word in a fresh folder. A bot
written from the README must play in the tournament the README shows."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Writing a bot in Python"


def section_blocks() -> tuple[str, list[str]]:
    """The section's Python block and its shell commands (continuation lines joined)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"```(\w+)\n(.*?)```", text[start:end], re.DOTALL)
    python = [body for lang, body in blocks if lang == "python"]
    shell = [body for lang, body in blocks if lang == "sh"]
    assert len(python) == 1 and len(shell) == 1, "the section shows one bot and one sh block"
    commands = [line.strip() for line in shell[0].replace("\\\n", " ").splitlines()
                if line.strip()]
    return python[0], commands


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh folder with the README's bot as my_bot.py and .venv as the repository's."""
    path = tmp_path_factory.mktemp("first-steps")
    (path / ".venv").symlink_to(sys.prefix)
    bot, _ = section_blocks()
    (path / "my_bot.py").write_text(bot, encoding="utf-8")
    return path


def run(folder: Path, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(shlex.split(command), cwd=folder, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def command(word: str) -> str:
    _, commands = section_blocks()
    [found] = [c for c in commands if c.startswith(f".venv/bin/scout-arena {word} ")]
    return found


def test_the_readme_bot_plays_in_process(folder: Path) -> None:
    done = run(folder, command("play"), 120)
    assert "my_bot.py:MyBot" in done.stdout and "greedy" in done.stdout


def test_the_readme_bot_plays_the_readme_tournament(folder: Path) -> None:
    line = command("tournament")
    run(folder, line, 300)
    out = folder / shlex.split(line)[shlex.split(line).index("--out") + 1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["matches_finished"] == summary["matches_total"] > 0
    mine = {s["bot"]: s for s in summary["standings"]}["mine"]
    assert mine["status"] == "connected" and mine["matches"] > 0
    assert mine["forfeits"] == 0 and mine["timeouts"] == 0 and mine["illegal_actions"] == 0


def test_the_readme_bot_is_tested_by_sprt(folder: Path) -> None:
    done = run(folder, command("sprt"), 300)
    assert "accepted" in done.stdout
