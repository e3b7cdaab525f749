"""The referee as the apps see it: what tournaments and the ladder need, and nothing more.

An app starts a referee server, learns which bots are connected and how many more matches
each takes, creates matches, and hears of every match that ends through its typed
`MatchRecord`; the ladder also vouches for tokens itself and hears of connections. Seats,
clocks, connections and the wire stay inside, so they can change without the apps noticing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, final

from scout_rules import SpectatorView, spectator_view
from scout_rules.protocol import TimeControl

from ..record import JSON, MatchRecord
from .calls import bearer_token
from .clock import DEFAULT_TIME_CONTROL
from .connections import Authenticator, tokens_equal
from .convert import ProtobufWire
from .events import (
    Assignment,
    BotEvent,
    Goodbye,
    GoodbyeReason,
    MatchEnded,
    MatchEndStatus,
    Probation,
)
from .health import Check
from .lifecycle import RefereeServer, exit_dead, wait_stopped_or_dead
from .listener import ExtraService, TlsConfig
from .match import MatchRunner
from .metrics import MetricsAccess, MetricsServer, serve_metrics
from .referee import Referee
from .turns import DEFAULT_PASS_BUDGET_MS


@final
class MatchInPlay:
    """A match being played, as onlookers may see it: it satisfies the web pages'
    `scout_arena.web.LiveMatch` (which this layer may not import)."""

    __slots__ = ("_match",)

    def __init__(self, match: MatchRunner) -> None:
        self._match = match

    @property
    def match_id(self) -> str:
        return self._match.match_id

    @property
    def players(self) -> Sequence[str]:
        """Bot names by seat."""
        return self._match.names

    def spectator_view(self) -> SpectatorView:
        """The public table now: never a card of a hand still in play."""
        return spectator_view(self._match.state)


def _record(match: MatchRunner) -> MatchRecord:
    record = match.record
    assert record is not None, "a match is stored before it is reported finished"
    return record


class RefereeFacade:
    """A referee and the gRPC server bots and organisers reach it on.

    ``tokens``: bot name -> token of the bots known from the start (`register_bot` adds more);
    ``authenticator`` names the bot of any other token, or refuses it. ``records_dir``: where
    each match's record is written as it ends (None: only the newest 100 stay in memory, for
    GetRecord; every record is handed to `on_match_finished` as it ends). ``extra_services``:
    (function adding a servicer to the grpc server, full service name) for services that share
    the port (the ladder's); each must register its methods. ``tls``: serve over TLS (and require
client certificates when it names a client CA). ``pass_budget_ms``: how much of an event-loop
pass match turns may take (`turns`; docs/deploy.md, "Under load")."""

    def __init__(self, tokens: Mapping[str, str] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, admin_token: str | None = None,
                 records_dir: Path | None = None, time_control: TimeControl = DEFAULT_TIME_CONTROL,
                 reconnect_grace_s: float = 10.0, authenticator: Authenticator | None = None,
                 extra_services: Sequence[ExtraService] = (),
                 tls: TlsConfig | None = None,
                 pass_budget_ms: float = DEFAULT_PASS_BUDGET_MS) -> None:
        self._referee = Referee(tokens or {}, wire=ProtobufWire(), records_dir=records_dir,
                                default_time_control=time_control,
                                reconnect_grace_s=reconnect_grace_s,
                                pass_budget_ms=pass_budget_ms)
        self._referee.bots.authenticator = authenticator
        self._server = RefereeServer(self._referee, host=host, port=port,
                                     admin_token=admin_token, extra_services=extra_services,
                                     tls=tls)
        self._metrics_server: MetricsServer | None = None

    bearer_token = staticmethod(bearer_token)
    """The token of a gRPC call's ``authorization: Bearer <token>`` metadata ("" if none): for
    services that share the referee's server and authenticate their callers the same way."""

    tokens_equal = staticmethod(tokens_equal)
    """Constant-time comparison of a token a caller gave with the expected one."""

    @property
    def core(self) -> Referee:
        """The referee itself, for the hosting layer (`scout_arena.hosting.Host` runs the
        hosted seats of its matches); apps use the methods here."""
        return self._referee

    @property
    def address(self) -> str:
        """host:port the server listens on (the port is chosen at construction when 0)."""
        return self._server.address

    async def start(self) -> None:
        await self._server.start()

    def serve_metrics(self, host: str = "127.0.0.1", port: int = 0,
                      access: MetricsAccess | None = None) -> str:
        """Serve the referee's Prometheus metrics (`scout_arena.server.metrics`) and the
        probes /livez and /readyz over HTTP, in a daemon thread, until `stop`; returns the
        metrics' URL (port 0 picks a free one). ``access``: a token, TLS (`metrics_http`)."""
        if self._metrics_server is None:
            self._metrics_server = serve_metrics(self._referee.metrics, host, port,
                                                 probes=self._server.health, access=access)
        return self._metrics_server.url

    async def set_problem(self, check: str, problem: str | None) -> None:
        """Readiness: ``check`` fails with ``problem`` (None: it passes); gRPC health and
        /readyz say NOT_SERVING while any check fails (`health`)."""
        await self._server.health.set_problem(check, problem)

    def watch_health(self, check: str, probe: Check, every_s: float) -> None:
        """Run ``probe`` every ``every_s`` seconds; its answer is the problem of ``check``."""
        self._server.health.watch(check, probe, every_s)

    def add_gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """Add a gauge to the metrics `serve_metrics` serves, read (``read()``, in the
        metrics thread: keep it a ``len()``) when scraped."""
        self._referee.metrics.add_gauge(name, documentation, read)

    async def stop(self, drain_s: float = 0.0, *, finished: bool = False,
                   message: str = "") -> None:
        """Stop taking matches, give running ones ``drain_s`` to finish, abort the rest (each
        still writes its record and is reported finished, as aborted), tell every connected
        bot Goodbye, then close the server. ``finished``: the event is over, so the Goodbye
        is FINISHED and bots exit; otherwise it is SHUTDOWN and bots come back after a
        while (a restart). ``message`` goes into the Goodbye, for the bots' logs."""
        if finished:
            goodbye = Goodbye(GoodbyeReason.FINISHED, message or "the event is over",
                              reconnect=False)
        else:
            goodbye = self._server.shutdown_goodbye()
            if message:
                goodbye = dataclasses.replace(goodbye, message=message)
        try:
            await self._server.stop(drain_s, goodbye)
        finally:
            metrics_server, self._metrics_server = self._metrics_server, None
            if metrics_server is not None:  # its shutdown waits up to 0.5 s for its thread
                await asyncio.to_thread(metrics_server.close)

    async def wait_dead(self) -> str:
        """Return why, once the grpc server is found dead (never, while it is alive): see
        `wait_stopped_or_dead`."""
        return await self._server.liveness.wait_dead()

    async def wait_stopped_or_dead(self, stop: asyncio.Event) -> str | None:
        """Wait until ``stop`` is set (returns None) or the grpc server is found dead (returns
        why). A dead server takes no new connection: its owner should stop within a few
        seconds and exit non-zero, so that a supervisor restarts it (see `exit_dead`)."""
        return await wait_stopped_or_dead(stop, self._server.liveness)

    @staticmethod
    async def exit_dead(address: str, reason: str, drain: Awaitable[None]) -> NoReturn:
        """Run ``drain`` (bounded), log CRITICAL and raise SystemExit(3): what an app does
        once `wait_stopped_or_dead` told it its server died."""
        await exit_dead(address, reason, drain)

    # ----- bots -----------------------------------------------------------------------------

    def register_bot(self, name: str, token: str) -> None:
        """Let a bot in with ``token`` (a new token for a known bot replaces its old one)."""
        self._referee.register(name, token)

    def on_connect(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(bot name)`` whenever a bot's stream is accepted (new or resumed)."""
        self._referee.streams.on_connect.append(lambda bot: callback(bot.name))

    def connected_bots(self) -> dict[str, int]:
        """Every connected bot, with how many more matches it takes now (0: it is busy). A bot
        not in the mapping is not connected."""
        return {bot.name: bot.free_slots for bot in self._referee.bots
                if bot.connection is not None}

    # ----- matches --------------------------------------------------------------------------

    def create_match(self, bots: Sequence[str], seed: int | None = None,
                     time_control: TimeControl | None = None, *,
                     absent: Collection[str] = (), absent_ok: bool = False,
                     meta: JSON | None = None, match_id: str | None = None) -> str:
        """Start a match now and return its id. ``bots`` by seat; seats of bots in ``absent``
        (or, with ``absent_ok``, of bots not connected) forfeit from the first move and are
        played by the fallback. ``meta`` is kept in the record (`MatchRecord.meta_value`).
        ``match_id``: the caller's (a ladder's, written before the match starts; a tournament's,
        derived from its seed so that bots keyed on it replay), else a random one. Raises a
        `MatchRequestError` naming what to change
        when the match cannot start."""
        match = self._referee.create_match(bots, seed, time_control, absent=absent,
                                           absent_ok=absent_ok, meta=meta, match_id=match_id)
        return match.match_id

    # ----- nodes: matches a ladder places on other referees (PROTOCOL.md §3.8) ------------

    def send_assignment(self, bot: str, match_id: str, address: str, ticket: str,
                        tls: bool = False) -> bool:
        """Tell a connected bot to play ``match_id`` on the node at ``address`` with
        ``ticket``; False when the bot has no live stream here."""
        return self._tell(bot, Assignment(match_id, address, ticket, tls))

    def send_voided(self, bot: str, match_id: str, reason: str) -> bool:
        """Tell a connected bot that the ladder voided ``match_id`` (played on a node that is
        lost, or never begun): MatchEnded VOIDED on its stream here. False when the bot has no
        live stream here."""
        return self._tell(bot, MatchEnded(match_id, status=MatchEndStatus.VOIDED, reason=reason))

    def send_probation(self, bot: str, active: bool, reason: str,
                       lifted_by_reconnect: bool = True) -> bool:
        """Tell a connected bot it is on probation (``active``) or no longer; False when the
        bot has no live stream here."""
        return self._tell(bot, Probation(active, reason, lifted_by_reconnect))

    def _tell(self, bot: str, event: BotEvent) -> bool:
        entry = self._referee.bots.get(bot)
        if entry is None or entry.connection is None:
            return False
        entry.connection.send(self._referee.wire.encode(event))
        return True

    def host_match(self, match_id: str, seats: Sequence[tuple[str, str]], seed: int,
                   time_control: TimeControl | None = None, *, join_timeout_s: float = 10.0,
                   meta: JSON | None = None) -> None:
        """Hold a match a ladder assigned to this referee (a node): ``seats`` are (bot name,
        ticket) by seat; it starts once each bot has a stream here (opened with its ticket, or
        open already), or after ``join_timeout_s`` with the missing seats absent. It is then
        reported to `on_match_finished` like any other; `on_hosting_failed` hears of one that
        could not start. Raises `MatchRequestError` when it cannot be held."""
        self._referee.host_match(match_id, seats, seed,
                                 time_control or self._referee.default_time_control,
                                 join_timeout_s, meta)

    def cancel_match(self, match_id: str, reason: str, *, voided: bool = False) -> bool:
        """Drop a held match, or abort a running one (its record is written as aborted; its
        bots get MatchEnded ABORTED with ``reason``, or VOIDED when the ladder ``voided``
        it); False when no such match is held or running."""
        return self._referee.cancel_match(match_id, reason, voided)

    def on_hosting_failed(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(match id, why)`` when a held match could not start at all."""
        self._referee.assigned.on_hosting_failed.append(callback)

    def load(self) -> tuple[int, int]:
        """(matches running or held, bots connected)."""
        running = len(self._referee.matches.running) + len(self._referee.assigned.pending)
        connected = self._referee.streams.connected()
        return running, connected

    def on_match_finished(self, callback: Callable[[MatchRecord], None]) -> None:
        """Call ``callback(record)`` as each match ends, once its record is stored:
        ``record.status`` is "finished" (with a result) or "aborted" (stopped without one)."""
        self._referee.on_match_finished.append(lambda match: callback(_record(match)))

    def live_matches(self) -> list[MatchInPlay]:
        """The matches being played now; call it on the event loop, between two actions."""
        return [MatchInPlay(match) for match in self._referee.running()]
