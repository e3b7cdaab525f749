"""The SDK knows where the bot stands (issue 28): every match ends for the bot, however it ends;
probation is heard; a referee that does not come back after its SHUTDOWN is given up on.

Against fake referees on 127.0.0.1 (`test_sdk.FakeArena`), so that each message comes exactly
when the test says.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
import pytest
from scout_client import (
    Assignment,
    ConnectionLost,
    Goodbye,
    GoodbyeReason,
    MatchEnded,
    MatchEndStatus,
    Probation,
    RotationChoice,
    RotationRequest,
    run_bot,
)
from support.sdk_fakes import Connection, FakeArena, Recorder, cards, play, serving, start

pytestmark = pytest.mark.timeout(120)


class ProbationRecorder(Recorder):
    def on_probation(self, probation: Probation) -> None:
        self.calls.append(("probation", probation))


def test_an_aborted_match_calls_on_match_end_with_its_status_and_is_forgotten() -> None:
    bot = Recorder()

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), RotationRequest("m1", 3, 0, cards(1, 2), 2000, 0))
        assert await conn.recv() == RotationChoice("m1", 3, True)
        await conn.send(MatchEnded("m1", status=MatchEndStatus.ABORTED,
                                   reason="the referee shut down before the match ended"))
        # Whatever comes about it afterwards is not the bot's business any more.
        await conn.send(RotationRequest("m1", 4, 1, cards(1, 2), 2000, 0),
                        MatchEnded("m1", status=MatchEndStatus.ABORTED, reason="again"))
        assert await conn.drain() == []

    played = asyncio.run(play(FakeArena(script), bot, max_matches=1))
    assert played == 1
    ends = [value for kind, value in bot.calls if kind == "match_end"]
    assert ends == [MatchEnded("m1", status=MatchEndStatus.ABORTED,
                               reason="the referee shut down before the match ended")]
    end = ends[0]
    assert isinstance(end, MatchEnded)
    assert not end.finished
    assert bot.kinds() == ["start", "rotation", "match_end"]


def test_probation_is_logged_and_handed_to_on_probation(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    bot = ProbationRecorder()
    put = Probation(True, "3 of its last 3 matches had timeouts or forfeits", True)
    lifted = Probation(False, "lifted: the bot reconnected")

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(put, lifted)
        deadline = time.monotonic() + 10
        while len(bot.calls) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        conn_stop.set()

    arena = FakeArena(script)
    conn_stop = arena.stop
    with caplog.at_level(logging.INFO, logger="scout_client"):
        asyncio.run(play(arena, bot))
    assert bot.calls == [("probation", put), ("probation", lifted)]
    assert "the ladder put the bot on probation: 3 of its last 3 matches" in caplog.text
    assert "the bot's probation is over: lifted: the bot reconnected" in caplog.text


def test_a_match_voided_on_the_main_stream_ends_once_where_it_was_played() -> None:
    """The ladder says VOIDED on the main stream; the node's own ABORTED that follows is
    ignored: the bot hears one ending, and the match counts once."""
    bot = Recorder()

    async def scenario() -> int:
        node_started = asyncio.Event()
        voided = asyncio.Event()

        async def node(conn: Connection) -> None:
            await conn.handshake()
            await conn.send(start("m1"))
            node_started.set()
            await voided.wait()
            await asyncio.sleep(0.3)
            await conn.send(MatchEnded("m1", status=MatchEndStatus.ABORTED, reason="node"))
            await asyncio.sleep(0.3)
            main_arena.stop.set()

        node_arena = FakeArena(node)
        async with serving(node_arena) as node_address:

            async def main(conn: Connection) -> None:
                await conn.handshake()
                # The ticket is the bot's token: the fake node accepts only that.
                await conn.send(Assignment("m1", node_address, "secret-token"))
                await asyncio.wait_for(node_started.wait(), 10)
                await asyncio.sleep(0.2)
                await conn.send(MatchEnded("m1", status=MatchEndStatus.VOIDED,
                                           reason="its referee node n1 was lost"))
                voided.set()
                await conn.drain()

            main_arena = FakeArena(main)
            async with serving(main_arena) as address:
                played = await asyncio.wait_for(
                    run_bot(bot, address, "secret-token", stop_event=main_arena.stop), 30)
        main_arena.check()
        node_arena.check()
        return played

    played = asyncio.run(scenario())
    ends = [value for kind, value in bot.calls if kind == "match_end"]
    assert ends == [MatchEnded("m1", status=MatchEndStatus.VOIDED,
                               reason="its referee node n1 was lost")]
    assert played == 1


def test_after_a_shutdown_goodbye_the_sdk_gives_up_once_the_referee_stays_away() -> None:
    async def script(conn: Connection) -> None:
        if arena.connections == 1:
            await conn.handshake()
            await conn.send(Goodbye(GoodbyeReason.SHUTDOWN, "restarting", True, 50))
            return
        await conn.abort(grpc.StatusCode.UNAVAILABLE, "not back yet")

    arena = FakeArena(script)

    async def scenario() -> None:
        async with serving(arena) as address:
            await asyncio.wait_for(run_bot(Recorder(), address, "secret-token",
                                           give_up_after_s=1.5), 30)

    with pytest.raises(ConnectionLost, match=r"has not come back within 1\.5 s"):
        asyncio.run(scenario())
    assert arena.connections >= 3, "it gave up without trying to reconnect"


def test_a_void_after_the_match_ended_here_is_told_once(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    """A node can finish a match and die before the ladder hears the result: the ladder's void
    then comes after the bot's own ending, and the author must learn it does not count."""
    bot = Recorder()

    async def script(conn: Connection) -> None:
        await conn.handshake()
        await conn.send(start("m1"), MatchEnded("m1", status=MatchEndStatus.ABORTED,
                                                reason="node stopping"))
        deadline = time.monotonic() + 10
        while "match_end" not in bot.kinds() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        void = MatchEnded("m1", status=MatchEndStatus.VOIDED, reason="its referee node was lost")
        await conn.send(void, void)
        while "voided after" not in caplog.text and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # time for a second warning, were one to come
        arena.stop.set()

    arena = FakeArena(script)
    with caplog.at_level(logging.INFO, logger="scout_client"):
        played = asyncio.run(play(arena, bot))
    assert played == 1
    told = [r.getMessage() for r in caplog.records if "voided after it ended here" in
            r.getMessage()]
    assert told == ["match m1 voided after it ended here (its result does not count): "
                    "its referee node was lost"]
    assert bot.kinds() == ["start", "match_end"]
