"""The Python SDK says what its bot is doing: one INFO line when a match starts and one when it
ends, with the bot's result, on stderr by default for a plain script that calls `run()`; a
program that set up logging itself keeps its own settings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "scout_arena.cli"]

PLAIN = """
from scout_client import GreedyBot, run

run(GreedyBot())
"""

OWN_LOGGING = """
import logging

from scout_client import GreedyBot, run

logging.basicConfig(level=logging.WARNING)
run(GreedyBot())
"""


def test_run_logs_each_match_start_and_end_with_the_result(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / "own.py").write_text(OWN_LOGGING)
    out = tmp_path / "out"
    subprocess.run(
        [
            *CLI,
            "tournament",
            "--bot",
            f"plain={sys.executable} plain.py",
            "--bot",
            f"own={sys.executable} own.py",
            "--players",
            "2",
            "--games",
            "2",
            "--out",
            str(out),
            "--no-progress",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=180,
    )
    summary = json.loads((out / "summary.json").read_text())
    log = (out / "logs" / "plain.stderr.log").read_text()
    started = re.findall(
        r"INFO scout_client: match (m-\w+) started: seat (\d) of 2, "
        r"against own",
        log,
    )
    ended = dict(re.findall(r"INFO scout_client: match (m-\w+) ended: (rank \d of 2.*)", log))
    records = {Path(p).stem for p in summary["records"]}
    assert {match_id for match_id, _ in started} == set(ended) == records
    for match_id, seat in started:
        record = json.loads((out / "records" / f"{match_id}.json").read_text())
        rank, total = record["ranks"][int(seat)], record["totals"][int(seat)]
        assert ended[match_id].startswith(f"rank {rank} of 2")
        assert f"score {total:+d}" in ended[match_id]
    assert " started: " not in (out / "logs" / "own.stderr.log").read_text()
