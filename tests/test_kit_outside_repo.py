"""A starter kit copied out of the repository builds and plays (issue 29 item 10).

The kit's README says to start one's own bot from a copy of the kit, with SCOUT_PROTO_DIR naming
the repository's proto/ folder. This copies the Go kit (its sources only: no build output) into a
temporary folder, builds it there with the README's command, and plays the copy's binary
against a scripted referee: Hello with the token, Welcome, then Goodbye{FINISHED}, on which it
exits 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from referee_support import stop
from scout.v1 import arena_pb2
from support.kits import ROOT
from support.scripted import ScriptedReferee, goodbye, welcome

pytestmark = pytest.mark.timeout(900)

#: The Go kit's build output and generated code: what a fresh copy does not have.
GO_OUTPUT = ("bin", "dist", "gen", ".tools")


def test_go_kit_copied_out_of_the_repository_builds_with_scout_proto_dir_and_plays(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "my-bot"
    shutil.copytree(ROOT / "clients" / "go", copy, ignore=shutil.ignore_patterns(*GO_OUTPUT))
    env = {**os.environ, "SCOUT_PROTO_DIR": str(ROOT / "proto")}
    built = subprocess.run(
        ["make", "build"], cwd=copy, env=env, capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert (copy / "gen" / "scoutv1").is_dir() and (copy / "bin" / "scout-bot").is_file()

    referee = ScriptedReferee()
    log = tmp_path / "bot.log"
    with log.open("w") as out:
        bot = subprocess.Popen(
            ["bin/scout-bot"],
            cwd=copy,
            env=env | {"SCOUT_ADDRESS": referee.main_address, "SCOUT_TOKEN": "mine"},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        call = referee.call("main", 0, 60)
        hello = call.wait_hello(60)
        assert call.authorization == "Bearer mine" and hello.hello.protocol_version == 1
        call.send(
            welcome("mine", "s-1"),
            goodbye(arena_pb2.GOODBYE_REASON_FINISHED, "over", reconnect=False),
        )
        call.end()
        assert bot.wait(30) == 0, log.read_text()
    finally:
        stop(bot)
        referee.close()
