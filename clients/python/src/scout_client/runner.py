"""Connects a Bot to a referee and plays until told to stop: `run_bot`, and `run` for scripts.

One gRPC channel and one `Arena.Play` stream at a time carry every match the bot is seated in,
except the matches a ladder places on other referee nodes, which `nodes` plays on streams there.
The work is split by job: `connection` keeps the streams going (reconnecting with backoff,
raising `ConnectionRejected` when retrying cannot help, and stopping or coming back later as the
referee's Goodbye says), `matches` gives each match a worker that sees its messages in order,
and `decisions` asks the bot and answers every request in time, with the fallback when the bot
cannot. This module wires them together.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from grpc import aio

from .bot import Bot
from .connection import (
    GIVE_UP_AFTER_SHUTDOWN_S,
    Connection,
    Outbox,
    PemSource,
    backoff_delay,
    bearer_metadata,
    channel_options,
    goodbye_delay,
    open_channel,
    validate_token,
)
from .decisions import DEFAULT_SAFETY_MARGIN_MS, BotCalls, Decisions
from .errors import ConnectionLost, ConnectionRejected, InvalidToken, ScoutClientError
from .matches import Matches, Tally
from .matchlog import default_logging
from .nodes import NodeStreams
from .types import PROTOCOL_VERSION, Goodbye, Hello, MatchEnded, MatchMessage, Probation

__all__ = [
    "DEFAULT_SAFETY_MARGIN_MS",
    "ConnectionLost",
    "ConnectionRejected",
    "InvalidToken",
    "LaunchSettings",
    "PemSource",
    "ScoutClientError",
    "backoff_delay",
    "channel_options",
    "env_flag",
    "goodbye_delay",
    "run",
    "run_bot",
    "validate_token",
    "wants_public_events",
]

log = logging.getLogger("scout_client")


def wants_public_events(bot: Bot, public_events: bool | None = None) -> bool:
    """Whether to ask the referee for the full stream (`Hello.lean = false`: every PublicEvent
    and every ACCEPTED AnswerResult) rather than a lean one (PROTOCOL.md §3.6.1). `True` or
    `False` decides; None (the default) asks for events only when the bot overrides
    `on_event`, the one hook that needs them."""
    if public_events is not None:
        return public_events
    return getattr(type(bot), "on_event", None) is not getattr(Bot, "on_event", None)


def _hello(bot: Bot, max_concurrent_matches: int, public_events: bool | None) -> Hello:
    full = wants_public_events(bot, public_events)
    if public_events is False and wants_public_events(bot):
        log.warning("%s overrides on_event, but a lean stream was asked for: on_event will not "
                    "be called", type(bot).__name__)
    return Hello(
        bot_name=getattr(bot, "name", "") or type(bot).__name__,
        bot_version=str(getattr(bot, "version", "0")),
        protocol_version=PROTOCOL_VERSION,
        max_concurrent_matches=max_concurrent_matches,
        lean=not full,
    )


async def run_bot(
    bot: Bot,
    address: str,
    token: str,
    *,
    tls: bool = False,
    ca_cert: PemSource | None = None,
    client_cert: PemSource | None = None,
    client_key: PemSource | None = None,
    max_concurrent_matches: int = 8,
    reconnect: bool = True,
    stop_event: asyncio.Event | None = None,
    max_matches: int | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    use_time_bank: bool = True,
    public_events: bool | None = None,
    give_up_after_s: float = GIVE_UP_AFTER_SHUTDOWN_S,
) -> int:
    """Play on the referee at `address` (`host:port`, or `unix:/absolute/path` for a Unix
    domain socket) until `stop_event` is set, `max_matches` matches have ended, or the referee
    says Goodbye without asking the bot back; returns the number of matches that ended. A
    Goodbye that asks the bot back is obeyed: the SDK reconnects after its `retry_after_ms`,
    which is not a failure and grows no backoff.

    `tls` (implied by any certificate) uses TLS, with `ca_cert` to trust a private CA and
    `client_cert` + `client_key` when the referee requires client certificates; each is PEM
    bytes or a file path. The SDK answers with the fallback when the bot has not answered
    `safety_margin_ms` before the referee's limit: deadline + bank, or the deadline alone when
    `use_time_bank` is False. Raises InvalidToken (a ValueError) at once for a token gRPC could
    never send (see `validate_token`), ConnectionRejected when the referee refuses the bot, and
    ConnectionLost when the stream ends and `reconnect` is False (`error.goodbye` is set when
    the referee asked the bot to come back later), or when the referee said Goodbye{SHUTDOWN}
    and has not taken the bot back within `give_up_after_s` (15 minutes by default).

    The SDK asks for a lean stream (no PublicEvent, no ACCEPTED AnswerResult; PROTOCOL.md
    §3.6.1) unless the bot overrides `on_event` or `public_events` is True; False asks for a
    lean stream even then (see `wants_public_events`).
    """
    metadata = bearer_metadata(token)
    if max_concurrent_matches < 1:
        raise ValueError("max_concurrent_matches must be at least 1")
    if max_matches is not None and max_matches < 1:
        raise ValueError("max_matches must be at least 1 (or None for no limit)")
    if (client_cert is None) != (client_key is None):
        raise ValueError("client_cert and client_key go together")
    channel = open_channel(
        address, tls=tls, ca_cert=ca_cert, client_cert=client_cert, client_key=client_key
    )
    executor = ThreadPoolExecutor(
        max_workers=max(4, 2 * max_concurrent_matches), thread_name_prefix="scout-bot"
    )
    stop = asyncio.Event()
    outbox = Outbox()
    calls = BotCalls(bot, executor)
    decisions = Decisions(
        calls, outbox, safety_margin_ms=safety_margin_ms, use_time_bank=use_time_bank
    )
    tally = Tally(max_matches, stop)
    matches = Matches(calls, decisions, tally=tally)
    hello = _hello(bot, max_concurrent_matches, public_events)

    def node_channel(node_address: str, node_tls: bool) -> aio.Channel:
        return open_channel(node_address, tls=tls or node_tls, ca_cert=ca_cert,
                            client_cert=client_cert, client_key=client_key)

    nodes = NodeStreams(calls, tally, hello, node_channel, stop,
                        safety_margin_ms=safety_margin_ms, use_time_bank=use_time_bank)

    async def on_goodbye(goodbye: Goodbye) -> None:
        await calls.hook("on_goodbye", goodbye)

    hooks: set[asyncio.Task[None]] = set()

    def on_probation(probation: Probation) -> None:
        task = asyncio.ensure_future(calls.hook("on_probation", probation))
        hooks.add(task)
        task.add_done_callback(hooks.discard)

    def on_match_message(message: MatchMessage, received_at: float) -> None:
        # A ladder voids a match on a node on the main stream: it ends where it was played.
        if not (isinstance(message, MatchEnded) and nodes.end(message, received_at)):
            matches.receive(message, received_at)

    connection = Connection(
        channel,
        metadata,
        hello,
        outbox,
        on_welcome=matches.resync,
        on_match_message=on_match_message,
        on_goodbye=on_goodbye,
        on_assignment=nodes.assign,
        on_probation=on_probation,
        stop=stop,
        give_up_after_s=give_up_after_s,
    )
    watcher: asyncio.Task[None] | None = None
    if stop_event is not None:
        watcher = asyncio.ensure_future(_relay(stop_event, stop))
    try:
        try:
            await connection.run(reconnect)
        finally:
            # Everything is cancelled before anything is awaited, so no answer is worked
            # out, or match advanced, while the others wind down.
            stopping = [*matches.cancel(), *decisions.cancel(), *hooks]
            for hook in hooks:
                hook.cancel()
            await asyncio.gather(*stopping, nodes.close(), return_exceptions=True)
        return tally.finished
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await channel.close(None)
        # Threads of bots that overran cannot be stopped; do not wait for them.
        executor.shutdown(wait=False, cancel_futures=True)


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


def run(
    bot: Bot,
    address: str | None = None,
    token: str | None = None,
    *,
    tls: bool | None = None,
    ca_cert: PemSource | None = None,
    client_cert: PemSource | None = None,
    client_key: PemSource | None = None,
    max_concurrent_matches: int | None = None,
    reconnect: bool = True,
    max_matches: int | None = None,
    safety_margin_ms: int = DEFAULT_SAFETY_MARGIN_MS,
    use_time_bank: bool = True,
    public_events: bool | None = None,
    handle_signals: bool = True,
) -> int:
    """`run_bot` for plain scripts: runs its own event loop and, with `handle_signals`, stops
    gracefully on the first SIGINT/SIGTERM (a second Ctrl-C interrupts as usual).

    What is not given follows the launch convention (PROTOCOL.md §11.4), so that `run(MyBot())`
    plays wherever a tournament, a ladder's sandbox or CI starts the script: `address` from
    SCOUT_ADDRESS (`host:port` or `unix:/absolute/path`), `token` from SCOUT_TOKEN, `tls` from
    SCOUT_TLS=1, `ca_cert` from SCOUT_CA_CERT, `max_concurrent_matches` from SCOUT_CONCURRENCY
    (else 8), and SCOUT_PUBLIC_EVENTS=1 asks for the full stream when `public_events` is None.
    Raises ValueError when there is still no address or token."""
    default_logging()
    launch = LaunchSettings.from_environment(os.environ)
    target = address or launch.address
    credential = token or launch.token
    if not target:
        raise ValueError("no referee address: pass one to run() or set SCOUT_ADDRESS")
    if not credential:
        raise ValueError("no bot token: pass one to run() or set SCOUT_TOKEN")
    use_tls = launch.tls if tls is None else tls
    ca = launch.ca_cert if ca_cert is None else ca_cert
    concurrency = launch.concurrency if max_concurrent_matches is None else max_concurrent_matches
    events = True if public_events is None and launch.public_events else public_events

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []

        def on_signal() -> None:
            log.info("stopping")
            stop.set()
            for signum in installed:
                loop.remove_signal_handler(signum)

        if handle_signals:
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(signum, on_signal)
                except (NotImplementedError, RuntimeError, ValueError):
                    continue  # not the main thread, or a platform without signal handlers
                installed.append(signum)
        try:
            return await run_bot(
                bot,
                target,
                credential,
                tls=use_tls,
                ca_cert=ca,
                client_cert=client_cert,
                client_key=client_key,
                max_concurrent_matches=concurrency,
                reconnect=reconnect,
                stop_event=stop,
                max_matches=max_matches,
                safety_margin_ms=safety_margin_ms,
                use_time_bank=use_time_bank,
                public_events=events,
            )
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main())


@dataclass(frozen=True)
class LaunchSettings:
    """The launch convention's environment (PROTOCOL.md §11.4), read once."""

    address: str
    token: str
    tls: bool
    ca_cert: str | None
    concurrency: int
    public_events: bool

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> LaunchSettings:
        """Raises ValueError for a SCOUT_CONCURRENCY that is not a whole number of at least 1."""
        text = environ.get("SCOUT_CONCURRENCY", "").strip()
        try:
            concurrency = int(text) if text else 8
        except ValueError:
            concurrency = 0
        if concurrency < 1:
            raise ValueError(f"SCOUT_CONCURRENCY={text!r}: want a whole number of at least 1")
        return cls(
            address=environ.get("SCOUT_ADDRESS", "").strip(),
            token=environ.get("SCOUT_TOKEN", "").strip(),
            tls=env_flag(environ, "SCOUT_TLS"),
            ca_cert=environ.get("SCOUT_CA_CERT") or None,
            concurrency=concurrency,
            public_events=env_flag(environ, "SCOUT_PUBLIC_EVENTS"),
        )


def env_flag(environ: Mapping[str, str], name: str) -> bool:
    """Whether the variable says yes (1, true, yes, on; any case)."""
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """Stock asyncio, or uvloop (where installed) with ``SCOUT_EVENT_LOOP=uvloop`` or ``auto``
    (it saves a bot a little CPU per round trip; stock asyncio is what the SDK is tested on)."""
    if os.environ.get("SCOUT_EVENT_LOOP") in ("uvloop", "auto"):
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop
