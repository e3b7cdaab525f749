"""Children tied to their parent's life (`scout_arena.sandbox.lifeline`), as real processes;
the ladder's local nodes with it are in test_ladder_local_nodes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from scout_arena.sandbox.lifeline import ORPHAN_EXIT_STATUS, lifeline_env

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


def test_an_orphan_that_does_not_stop_on_sigterm_says_where_it_hangs_and_exits() -> None:
    """A graceful stop that hangs (here: SIGTERM ignored) ends anyway, with its stacks."""
    stubborn = ("from scout_arena.sandbox.lifeline import hold_lifeline; import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "assert hold_lifeline(exit_after_s=0.5); print('held', flush=True); "
                "time.sleep(120)")
    child = subprocess.Popen([sys.executable, "-c", stubborn], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **lifeline_env()})
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "held\n"
        child.stdin.close()
        assert child.wait(30) == ORPHAN_EXIT_STATUS
        assert child.stderr is not None
        stderr = child.stderr.read()
        assert "did not stop within 0.5 s of SIGTERM" in stderr
        assert 'File "<string>", line 1 in <module>' in stderr, stderr
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_child_without_a_lifeline_holds_none() -> None:
    from scout_arena.sandbox.lifeline import hold_lifeline

    assert not hold_lifeline({})
    assert not hold_lifeline({"SCOUT_LIFELINE": "not:a-number"})
