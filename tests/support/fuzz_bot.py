"""The fuzzing bot of tests/test_fuzz_bot_messages.py: its live Play stream, reopened whenever a
frame ends it, and the reactions it waits for."""

from __future__ import annotations

import asyncio
import time

import grpc
from referee_support import (
    admin_metadata,
)
from scout.v1 import arena_pb2, game_pb2, matches_pb2

from support.fuzz_book import FuzzBotBook, SeatView
from support.fuzz_oracle import (
    BAD_MESSAGE,
    FUZZ_BANK_MS,
    FUZZ_DECISION_MS,
    FUZZ_MAX_MATCHES,
    FUZZ_OPPONENTS,
    FUZZ_RUNNING,
    LIMIT,
    REACTION_S,
    RUNNING,
    parse_bot_message,
)
from support.rawbot import (
    TIMED_OUT,
    RawCall,
    hello,
    kind_of,
)


class FuzzBot(FuzzBotBook):
    """The fuzzing bot: one live Play stream (reopened whenever a frame ends it), its matches'
    state, and the oracle that says what the referee must answer to each frame."""

    async def connect(self) -> None:
        """Open a call, say Hello, and check the Welcome and the resync. An empty BotMessage
        right after the Hello is a marker: its ProtocolError{BAD_MESSAGE} follows everything
        the referee queued while attaching the stream (the resync), so the resync block is
        exactly what comes between the Welcome and that error."""
        call = RawCall(self.channel, self.token, bound=REACTION_S)
        await call.write(
            hello("fuzzer", version="0-fuzz", max_matches=FUZZ_MAX_MATCHES).SerializeToString()
        )
        await call.write(b"")
        block: list[arena_pb2.RefereeMessage] = []
        try:
            first = await call.next()
            while True:
                message = await call.next()
                if message is None:
                    raise self.fail(
                        f"the call ended during the handshake: {call.code} {call.details!r}"
                    )
                if kind_of(message) == "error":
                    if message.error.code != BAD_MESSAGE:
                        raise self.fail(f"marker answered with {message.error}")
                    break
                block.append(message)
        except TimeoutError:
            raise self.fail("no Welcome / marker error within the bound") from None
        if first is None or kind_of(first) != "welcome":
            raise self.fail(f"first message is not a Welcome: {first}")
        welcome = first.welcome
        if welcome.protocol_version != 1 or welcome.bot_name != self.name:
            raise self.fail(f"bad Welcome {welcome}")
        self.call = call
        self.reconnects += 1
        await self._resync(welcome, block)

    async def _resync(
        self, welcome: arena_pb2.Welcome, block: list[arena_pb2.RefereeMessage]
    ) -> None:
        running = {s.match_id: s for s in self.running()}
        resumed: list[str] = []
        index = 0
        while (
            index < len(block)
            and kind_of(block[index]) == "match_start"
            and block[index].match_start.resumed
        ):
            start = block[index].match_start
            index += 1
            seat = running.get(start.match_id)
            if seat is None:
                raise self.fail(f"resumed a match the bot does not play: {start}")
            if (start.seat, list(start.player_names), start.strikes, start.time_bank_ms) != (
                seat.seat,
                seat.bots,
                seat.strikes,
                FUZZ_BANK_MS,
            ):
                raise self.fail(
                    f"MatchStart{{resumed}} {start} disagrees with seat {seat.seat} "
                    f"strikes {seat.strikes}"
                )
            resumed.append(start.match_id)
            seat.started = True
            following = block[index] if index < len(block) else None
            is_request = (
                following is not None
                and kind_of(following) in ("rotation_request", "decision_request")
                and getattr(following, kind_of(following) or "").match_id == start.match_id
            )
            if seat.open is not None:
                if not is_request:
                    raise self.fail(
                        f"{start.match_id}: request {seat.open_id} was open but "
                        f"the resync did not send it again"
                    )
                assert following is not None
                again = getattr(following, kind_of(following) or "")
                if (kind_of(following), again.request_id) != (seat.open_kind, seat.open_id):
                    raise self.fail(
                        f"{start.match_id}: resync sent {kind_of(following)} "
                        f"{again.request_id}, open was {seat.open_kind} "
                        f"{seat.open_id}"
                    )
                if again.deadline_ms > FUZZ_DECISION_MS or again.time_bank_ms > FUZZ_BANK_MS:
                    raise self.fail(f"resync clock {again.deadline_ms}/{again.time_bank_ms}")
                if kind_of(following) == "decision_request":
                    old = seat.open.decision_request
                    if (
                        list(again.legal_shows),
                        list(again.legal_scouts),
                        again.observation.hand,
                    ) != (list(old.legal_shows), list(old.legal_scouts), old.observation.hand):
                        raise self.fail(f"{start.match_id}: the re-sent decision differs")
                seat.open = following
                index += 1
            elif is_request:  # sent while the bot was away
                assert following is not None
                if seat.forfeited:
                    raise self.fail(f"{start.match_id}: a request for a forfeited seat")
                self._take_request(following, resent=True)
                index += 1
        if welcome.resumed != bool(resumed):
            raise self.fail(
                f"Welcome.resumed {welcome.resumed} but {len(resumed)} matches were resumed"
            )
        self.resumed_matches += len(resumed)
        for match_id, seat in running.items():
            if match_id in resumed:
                continue
            # Not resumed: it must have ended while the bot was away (its MatchEnded was lost).
            info = await self.live.get_match(match_id)
            if info.status == RUNNING:
                raise self.fail(f"{match_id} is running but was not resumed")
            if seat.open is not None:
                raise self.fail(f"{match_id} ended while request {seat.open_id} was open")
            seat.ended = seat.ended_while_away = True
        self.note(f"connected (resumed {resumed})")
        for message in block[index:]:
            self.apply(message)

    async def pump(self, timeout: float) -> bool:
        """Apply the next message; False if none came within ``timeout``."""
        assert self.call is not None
        try:
            message = await self.call.next(timeout)
        except TimeoutError:
            return False
        if message is None:
            raise self.fail(f"the call ended unprompted: {self.call.code} {self.call.details!r}")
        kind = kind_of(message)
        if kind == "error" or (
            kind == "answer_result" and message.answer_result.status != TIMED_OUT
        ):
            raise self.fail(f"unsolicited {kind}: {message}")
        self.apply(message)
        return True

    async def ensure_target(self) -> None:
        """Make sure the bot has an open request (creating matches as needed)."""
        deadline = time.monotonic() + 60
        while not self.open_seats():
            if len(self.running()) < FUZZ_RUNNING:
                await self.create_match()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.fail("no open request within 60 s")
            await self.pump(remaining)

    async def create_match(self) -> None:
        others = FUZZ_OPPONENTS[self._tables % len(FUZZ_OPPONENTS)]
        self._tables += 1
        bots = [self.name, *others]
        self.rng.shuffle(bots)
        request = matches_pb2.CreateMatchRequest(
            bots=bots,
            seed=self.rng.getrandbits(64),
            time_control=game_pb2.TimeControl(
                decision_ms=FUZZ_DECISION_MS, time_bank_ms=FUZZ_BANK_MS
            ),
        )
        info = await self.live.matches.CreateMatch(request, metadata=admin_metadata(), timeout=10)
        self.seats[info.match_id] = SeatView(
            info.match_id, list(info.bots).index(self.name), list(info.bots)
        )
        self.live.fuzz_matches.append(info.match_id)
        self.note(f"created {info.match_id} {bots}")

    async def exchange(self, data: bytes, what: str) -> str:
        """Send one frame and check the referee's reaction; returns a label for statistics."""
        assert self.call is not None
        parsed = parse_bot_message(data) if len(data) <= LIMIT else None
        self.note(f"-> {what} ({len(data)} bytes): {data[:40]!r}")
        try:
            await self.call.write(data)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, TimeoutError) as exc:
            raise self.fail(
                f"could not write ({exc!r}); call {self.call.code} {self.call.details!r}"
            ) from None
        if len(data) > LIMIT or parsed is None:
            want = (
                grpc.StatusCode.RESOURCE_EXHAUSTED
                if len(data) > LIMIT
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            await self._expect_end(want)
            label = f"call ended {want.name}"
        else:
            label = await self._expect_reaction(parsed)
        self.outcomes[f"{self.phase}: {label}"] += 1
        return label

    async def _expect_end(self, want: grpc.StatusCode) -> None:
        assert self.call is not None
        call = self.call
        while True:
            try:
                message = await call.next()
            except TimeoutError:
                raise self.fail(f"hang: the call should end with {want.name}") from None
            if message is None:
                break
            kind = kind_of(message)
            if kind == "error" or (
                kind == "answer_result" and message.answer_result.status != TIMED_OUT
            ):
                raise self.fail(
                    f"a reaction ({message}) instead of the call ending with {want.name}"
                )
            self.apply(message)
        if call.code != want:
            raise self.fail(
                f"the call ended with {call.code} {call.details!r}, expected {want.name}"
            )
        self.note(f"<- call ended {call.code.name} {call.details[:80]!r}")
        await call.close()
        self.call = None
        await self.connect()

    async def _expect_reaction(self, parsed: arena_pb2.BotMessage) -> str:
        assert self.call is not None
        while True:
            try:
                message = await self.call.next()
            except TimeoutError:
                raise self.fail(f"hang: no reaction to {kind_of(parsed)}") from None
            if message is None:
                raise self.fail(
                    f"the call ended ({self.call.code} {self.call.details!r}) "
                    f"instead of reacting to {kind_of(parsed)}"
                )
            kind = kind_of(message)
            if kind == "error" or (
                kind == "answer_result" and message.answer_result.status != TIMED_OUT
            ):
                break
            self.apply(message)
        body = kind_of(parsed)
        if body in (None, "hello") or (body == "bundle" and not parsed.bundle.messages):
            if kind != "error" or message.error.code != BAD_MESSAGE or not message.error.message:
                raise self.fail(
                    f"{body or 'no body'}: expected ProtocolError{{BAD_MESSAGE}}, got {message}"
                )
            self.note(f"<- error BAD_MESSAGE ({body or 'empty'})")
            return f"{body or 'empty'} -> BAD_MESSAGE"
        if kind != "answer_result":
            raise self.fail(f"{body}: expected an AnswerResult, got {message}")
        return self._check_result(parsed, message.answer_result)

    async def advance(self, pick: int) -> None:
        """Answer one open request legally, so the matches move on (new positions to fuzz)."""
        seats = self.open_seats()
        if seats:
            seat = seats[pick % len(seats)]
            label = await self.exchange(
                self.legal_answer(seat, pick).SerializeToString(), "legal answer"
            )
            if not label.endswith("ACCEPTED"):
                raise self.fail(f"a legal answer got {label}")

    async def settle(self) -> None:
        """Read whatever has arrived (bounded), so the state is current."""
        while await self.pump(0.05):
            pass
