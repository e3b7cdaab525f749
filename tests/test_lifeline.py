"""Children tied to their parent's life (`scout_arena.sandbox.lifeline`), as real processes;
the ladder's local nodes with it are in test_ladder_local_nodes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from scout_arena.sandbox.lifeline import lifeline_env

CHILD = ("from scout_arena.sandbox.lifeline import hold_lifeline; import time; "
         "assert hold_lifeline(); print('held', flush=True); time.sleep(120)")


def test_a_child_whose_lifeline_pipe_closes_is_stopped_with_sigterm() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **lifeline_env()})
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "held\n"
        assert child.poll() is None
        assert child.stdin is not None
        child.stdin.close()  # what the parent's death does to the pipe
        assert child.wait(30) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_child_without_a_lifeline_holds_none() -> None:
    from scout_arena.sandbox.lifeline import hold_lifeline

    assert not hold_lifeline({})
    assert not hold_lifeline({"SCOUT_LIFELINE": "not:a-number"})
