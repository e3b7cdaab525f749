"""Every starter kit, driven by a scripted referee through what a ladder with nodes sends only in
rare states (issue 28; PROTOCOL.md §3.8, §3.9, §10.1).

Each kit's real process plays against tests/support/scripted.py (a main and a node Arena server
in this process, the test saying every message), in one run per kit:

1. its first main stream fails without a Goodbye (UNAVAILABLE): a fault, so it reconnects;
2. the ladder puts it on probation and lifts it: it logs both, with the reason;
3. a MatchAssignment sends it to the node (ticket-1), where it answers a request; the
   assignment comes again (as after every Welcome; a ladder re-sends the same ticket, here a
   different one, which must win too): no second node stream, and when the node stream is cut
   the kit reopens it with ticket-2 and answers the re-sent request on the new stream;
4. matches end FINISHED, ABORTED (on the node), VOIDED (the node's match, said on the main
   stream, as a ladder that lost the node does) and UNSPECIFIED (read as FINISHED): each is
   logged as what it was, with its reason; late requests of ended matches get no answer, and
   with its only ticket voided the kit does not reopen the cut node stream;
5. Goodbye{SHUTDOWN, reconnect, retry_after_ms}: the kit half-closes its stream, comes back no
   sooner than asked, and after a second shutdown Goodbye, with the referee down for good,
   gives up once --shutdown-give-up-ms has passed (exit status 1), not before trying again.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from referee_support import stop
from scout.v1 import arena_pb2
from support.kits import KITS, ROOT, Kit, require
from support.scripted import (
    Call,
    ScriptedReferee,
    assignment,
    goodbye,
    match_ended,
    match_start,
    probation,
    rotation_request,
    welcome,
)

# A kit's first build can take minutes (crates, Maven artefacts, apt for C++); it runs inside the
# first test that needs that kit.
pytestmark = pytest.mark.timeout(1200)

TOKEN = "scripted-token"
START_TIMEOUT_S = 60.0
REACTION_TIMEOUT_S = 10.0
#: After a late request of an ended match, how long an answer would have had to come.
LATE_ANSWER_WINDOW_S = 0.5
PROBATION_REASON = "3 forfeits in a row: the bot did not answer in time"
ABORT_REASON = "the referee stopped before the match's end"
VOID_REASON = "its referee node 127.0.0.1:1 was lost: it closed its stream"
SHUTDOWN_MESSAGE = "the scripted ladder restarts"
RETRY_AFTER_MS = 800
#: Timer granularity and clock reading slack below retry_after_ms.
RETRY_SLACK_S = 0.1
GIVE_UP_MS = 3000

FINISHED = arena_pb2.MATCH_END_STATUS_FINISHED
ABORTED = arena_pb2.MATCH_END_STATUS_ABORTED
VOIDED = arena_pb2.MATCH_END_STATUS_VOIDED
UNSPECIFIED = arena_pb2.MATCH_END_STATUS_UNSPECIFIED
SHUTDOWN = arena_pb2.GOODBYE_REASON_SHUTDOWN


@pytest.fixture
def referee() -> Iterator[ScriptedReferee]:
    scripted = ScriptedReferee()
    try:
        yield scripted
    finally:
        scripted.close()


def tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return f"--- {path.name} ---\n" + "\n".join(text.splitlines()[-lines:])


def launch(kit: Kit, address: str, log: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SCOUT_ADDRESS": address,
        "SCOUT_TOKEN": TOKEN,
        "SCOUT_BOT_NAME": kit.name,
        "SCOUT_CONCURRENCY": "4",
    }
    env.pop("SCOUT_PUBLIC_EVENTS", None)
    with log.open("w") as out:
        return subprocess.Popen(
            [*kit.command, "--shutdown-give-up-ms", str(GIVE_UP_MS)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def said_hello(call: Call, bearer: str, name: str) -> None:
    hello = call.wait_hello(START_TIMEOUT_S)
    assert call.authorization == f"Bearer {bearer}", call
    assert hello.hello.protocol_version == 1 and hello.hello.bot_name == name, hello


def play_one_request(call: Call, match_id: str, name: str) -> None:
    """Starts `match_id` on `call` with one request and waits for its answer: every message the
    stream carried before has been handled by then (a kit reads its stream in order)."""
    call.send(match_start(match_id, name), rotation_request(match_id, 1))
    call.wait_answer(match_id, 1, REACTION_TIMEOUT_S)


@pytest.mark.parametrize("name", list(KITS))
def test_kit_handles_probation_every_match_ending_a_resent_assignment_and_a_shutdown(
    name: str, built_kits: dict[str, str], referee: ScriptedReferee, tmp_path: Path
) -> None:
    kit = require(built_kits, name)
    log = tmp_path / f"{name}.log"
    bot = launch(kit, referee.main_address, log)
    try:
        run_script(name, referee, bot, log)
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{tail(log)}") from failure
    finally:
        stop(bot)


def run_script(name: str, referee: ScriptedReferee, bot: subprocess.Popen[str], log: Path) -> None:
    # 1. A stream that fails without a Goodbye is a fault: the kit reconnects.
    first = referee.call("main", 0, START_TIMEOUT_S)
    said_hello(first, TOKEN, name)
    first.send(welcome(name, "s-1"))
    first.abort(grpc.StatusCode.UNAVAILABLE, "the scripted ladder lost the stream")
    main = referee.call("main", 1, REACTION_TIMEOUT_S)
    said_hello(main, TOKEN, name)
    assert bot.poll() is None, "the kit exited on UNAVAILABLE"
    main.send(welcome(name, "s-2"))

    # 2. Probation, on and off.
    main.send(probation(True, PROBATION_REASON, lifted_by_reconnect=True), probation(False))

    # 3. An assignment to the node, then the same match's assignment with a fresh ticket.
    main.send(assignment("m-node", referee.node_address, "ticket-1"))
    node = referee.call("node", 0, REACTION_TIMEOUT_S)
    said_hello(node, "ticket-1", name)
    node.send(welcome(name, "n-1"))
    play_one_request(node, "m-node", name)
    main.send(assignment("m-node", referee.node_address, "ticket-2"))
    play_one_request(main, "m-fin", name)  # the re-sent assignment has been handled
    node.abort(grpc.StatusCode.UNAVAILABLE, "the scripted node lost the stream")
    resumed = referee.call("node", 1, REACTION_TIMEOUT_S)
    said_hello(resumed, "ticket-2", name)
    resumed.send(
        welcome(name, "n-2", resumed=True),
        match_start("m-node", name, resumed=True),
        rotation_request("m-node", 1),
    )
    resumed.wait_answer("m-node", 1, REACTION_TIMEOUT_S)

    # 4. Every way a match ends; afterwards nothing of those matches is answered or reopened.
    main.send(match_ended("m-fin", FINISHED))
    play_one_request(resumed, "m-abort", name)
    resumed.send(match_ended("m-abort", ABORTED, ABORT_REASON))
    main.send(match_ended("m-node", VOIDED, VOID_REASON))
    play_one_request(main, "m-old", name)
    main.send(match_ended("m-old", UNSPECIFIED))
    main.send(rotation_request("m-fin", 2), rotation_request("m-node", 2))
    resumed.send(rotation_request("m-abort", 2))
    play_one_request(resumed, "m-last-node", name)
    resumed.send(match_ended("m-last-node", FINISHED))
    resumed.abort(grpc.StatusCode.UNAVAILABLE, "the scripted node is gone")
    play_one_request(main, "m-last", name)
    main.send(match_ended("m-last", FINISHED))
    time.sleep(LATE_ANSWER_WINDOW_S)
    late = [
        (call.role, match_id)
        for call, match_id in ((main, "m-fin"), (main, "m-node"), (resumed, "m-abort"))
        if call.answered(match_id, 2)
    ]
    assert not late, f"answered requests of ended matches: {late}"
    assert len(referee.calls["node"]) == 2, f"node stream reopened: {referee.calls['node']}"

    # 5. Shutdown: half-close, come back when asked; shut down for good: give up.
    main.send(goodbye(SHUTDOWN, SHUTDOWN_MESSAGE, reconnect=True, retry_after_ms=RETRY_AFTER_MS))
    main.wait_half_closed(REACTION_TIMEOUT_S)
    main.end()
    back = referee.call("main", 2, REACTION_TIMEOUT_S)
    assert main.ended is not None
    waited = back.opened - main.ended
    assert waited >= RETRY_AFTER_MS / 1000 - RETRY_SLACK_S, (
        f"came back {waited:.3f} s after the Goodbye; asked to wait {RETRY_AFTER_MS} ms"
    )
    said_hello(back, TOKEN, name)
    back.send(welcome(name, "s-3"))
    play_one_request(back, "m-after", name)  # welcomed: the give-up clock starts afresh
    referee.refuse_main = True
    gone = time.monotonic()
    back.send(goodbye(SHUTDOWN, SHUTDOWN_MESSAGE, reconnect=True, retry_after_ms=100))
    back.wait_half_closed(REACTION_TIMEOUT_S)
    back.end()
    try:
        status = bot.wait(GIVE_UP_MS / 1000 + 30)
    except subprocess.TimeoutExpired:
        raise AssertionError("the kit did not give up after the shutdown") from None
    assert status == 1, f"exit status {status} after giving up"
    assert time.monotonic() - gone >= GIVE_UP_MS / 1000 - RETRY_SLACK_S
    assert len(referee.refused) >= 2, f"gave up after {len(referee.refused)} attempt(s)"
    assert len(referee.calls["main"]) == 3, referee.calls["main"]

    text = log.read_text(errors="replace")
    lines = text.lower().splitlines()
    assert PROBATION_REASON in text and SHUTDOWN_MESSAGE in text
    assert any("probation" in line and "lifted" in line for line in lines)
    for match_id, how, reason in (
        ("m-fin", "finished", ""),
        ("m-abort", "aborted", ABORT_REASON),
        ("m-node", "voided", VOID_REASON),
        ("m-old", "finished", ""),
    ):
        assert any(match_id in line and how in line and reason.lower() in line for line in lines), (
            f"no log line says {match_id} ended {how}"
        )
    assert "giving up" in text
