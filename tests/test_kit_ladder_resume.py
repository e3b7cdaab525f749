"""A starter kit killed and restarted resumes its matches on a ladder's referee nodes (issue 28).

The same run as the SDK's in tests/test_ladder_endings.py, with the Go kit's real binary as the
slow bot: a ladder with two local referee nodes seats it in two matches on the nodes; it is
killed with SIGKILL mid-match and started again; the ladder re-sends the assignments after its
Welcome, and the kit reopens node streams with them and resumes both matches, forfeiting none.
One kit is enough here: tests/test_kit_scripted.py puts every kit through the messages.
"""

from __future__ import annotations

import pytest
from support.kits import require
from test_ladder_endings import (  # noqa: F401  (run: the fixture)
    LadderRun,
    kill_and_restart_in_two_matches,
    run,
)

pytestmark = pytest.mark.timeout(900)


def test_go_kit_killed_and_restarted_resumes_every_match_it_plays_on_the_nodes(
    run: LadderRun,  # noqa: F811
    built_kits: dict[str, str],
) -> None:
    kit = require(built_kits, "go")
    # 20 s of bank: the restart (a second or two) times out no request of the kit's.
    run.start("--nodes", "2", "--decision-ms", "2000", "--time-bank-ms", "20000")

    def start_kit() -> None:
        run.start_bot("slow", [*kit.command, "--think-ms", "150"], {"SCOUT_BOT_NAME": "slow"})

    playing, after = kill_and_restart_in_two_matches(run, start_kit, "match started")
    resumed = [line for line in after.splitlines() if "match resumed" in line]
    for match_id in playing:
        assert any(f"match={match_id}" in line for line in resumed), f"{match_id}\n{after}"
    assert "opening a stream there" in after, after
