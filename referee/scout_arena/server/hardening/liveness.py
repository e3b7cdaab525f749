"""Keep the referee's grpc.aio server serving through hostile HTTP/2, or make its death loud.

Why this exists. grpc.aio (1.85 here) decodes the ``:path`` of every call that matches no
*registered* method with a strict ``bytes.decode()`` inside the server's main loop
(``AioServer._server_main_loop`` in ``grpc/_cython/_cygrpc/aio/server.pyx.pxi``: ``method_name =
rpc_state.method().decode()``), before any handler or interceptor sees the call. Older releases
did that decode in ``_handle_rpc``, the task of one call, where a failure cost one call; it
moved into the main loop with the support for registered methods. So one HEADERS frame whose
``:path`` is not UTF-8 (``b"/gr\x80\xff"``) raises UnicodeDecodeError in the main loop: the
task dies, grpc logs the error once (``ERROR grpc._cython.cygrpc``) and its crash handler starts
a shutdown that itself fails on the same exception ("Task exception was never retrieved"). The
listener is closed, no new call is accepted, calls already running go on until they end, and
the process lives on with nothing to tell a supervisor. Worse, a process that goes on after
this crash may segfault a little later (seen in tests here, with and without this module): the
dying loop cancels its pending requests for calls and so frees their ``RPCState``, which grpc
core still points into, apparently writing there at shutdown. No server option, generic handler
or interceptor can prevent the crash: all act after the decode. No upstream report was found
(the nearest is grpc/grpc#25400, the same strict decode of untrusted bytes in
``ServicerContext.peer()``); file one with the reproduction in ``tests/test_hostile_http2.py``.

What this module does, in layers:

1. **Guard** (survives): a task factory on the event loop wraps the tasks in which the guarded
   server asks grpc core for its next *unregistered* call (``AioServer._request_call``). The
   call it yields is answered UNIMPLEMENTED with grpc's own machinery, and the main loop is told
   ``_RequestCallError``, on which it asks core for the next call; so it never decodes a path
   from the network. Calls to registered methods (generated stubs, health, reflection) are
   untouched. The price: a method that is *only* in a generic handler is answered
   UNIMPLEMENTED too, so every service of the guarded server must be registered
   (``server.add_registered_method_handlers``). The guard relies on grpc internals; it checks
   them when installed and stays off (with a warning) where they differ, leaving 2 and 3.
2. **Crash watch** (detects at once): a done-callback on the server's main-loop task (found
   among the loop's tasks), and ``server.wait_for_termination`` polled with a timeout, which
   re-raises the crash (the fallback, should that task not be found).
3. **Self-probe** (detects anything else that stops new calls): every ``probe_interval_s`` a
   health Check on a new connection to ``address`` with a deadline; ``probe_failures`` in a row
   that the server did not answer (UNAVAILABLE, DEADLINE_EXCEEDED, ...) mean dead.

On death: one CRITICAL log line, ``dead``/``reason`` set, ``wait_dead()`` returns, and
``on_dead(reason)`` runs in a task of its own; the owner drains briefly and exits non-zero there
(after the crash above the process is not to be trusted for long), so that a supervisor
restarts it. Nothing here blocks the event loop; every RPC it makes has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import ModuleType
from typing import Any, NoReturn, cast

import grpc

log = logging.getLogger("scout_arena.server.liveness")  # its name before the move to hardening/

_MAIN_LOOP = "AioServer._server_main_loop"
_REQUEST_CALL = "AioServer._request_call"
_HANDLE_RPC_ARGS = ("method_name", "method_resolver", "interceptors", "rpc_state", "loop",
                    "concurrency_exceeded")
_SCHEDULE_ARGS = ("rpc_coro", "rpc_state", "loop", "method_name")
_REJECTED_NAME = "<unregistered method>"
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_TERMINATION_POLL_S = 0.5

# Status codes a client sees when the server did not answer: only these count against it.
_NO_ANSWER = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
                        grpc.StatusCode.CANCELLED})

TaskFactory = Callable[..., "asyncio.Future[object]"]


def _cygrpc() -> ModuleType:
    return importlib.import_module("grpc._cython.cygrpc")


def _inner(server: grpc.aio.Server) -> object:
    """The Cython AioServer behind a grpc.aio.Server (None if grpc changed that)."""
    return getattr(server, "_server", None)


def _owned_by(coro: object, owners: dict[int, object]) -> object:
    """The object of ``owners`` whose method created the Cython coroutine ``coro``, or None.

    A Cython coroutine keeps its ``self`` in a closure object that the garbage collector can
    traverse: the closure is a referent of the coroutine, ``self`` a referent of the closure."""
    for ref in gc.get_referents(coro):
        if id(ref) in owners and owners[id(ref)] is ref:
            return ref
        for deeper in gc.get_referents(ref):
            if id(deeper) in owners and owners[id(deeper)] is deeper:
                return deeper
    return None


def _qualname(coro: object) -> str | None:
    name = getattr(coro, "__qualname__", None)
    return name if isinstance(name, str) else None


def guard_unavailable_reason(server: grpc.aio.Server) -> str | None:
    """Why the guard cannot protect ``server`` with this grpc, or None if it can."""
    try:
        cygrpc = _cygrpc()
    except ImportError as exc:
        return f"grpc._cython.cygrpc cannot be imported ({exc})"
    for name, args in (("_handle_rpc", _HANDLE_RPC_ARGS), ("_schedule_rpc_coro", _SCHEDULE_ARGS)):
        code = getattr(getattr(cygrpc, name, None), "__code__", None)
        if code is None or tuple(code.co_varnames[:len(args)]) != args:
            return f"cygrpc.{name} is missing or takes other arguments than {args}"
    error = getattr(cygrpc, "_RequestCallError", None)
    if not (isinstance(error, type) and issubclass(error, Exception)):
        return "cygrpc._RequestCallError is missing"
    try:
        cygrpc._MethodResolver([], {})
    except Exception as exc:
        return f"cygrpc._MethodResolver([], {{}}) fails ({exc!r})"
    inner = _inner(server)
    request_call = getattr(inner, "_request_call", None)
    if request_call is None:
        return "the grpc.aio server has no _server._request_call"
    # Creating the coroutine runs none of its body; closing it at once leaves no trace.
    probe = request_call()
    try:
        if _qualname(probe) != _REQUEST_CALL:
            return f"_request_call coroutines are named {_qualname(probe)!r}, not {_REQUEST_CALL!r}"
        if _owned_by(probe, {id(inner): inner}) is not inner:
            return "a _request_call coroutine does not lead back to its server"
    finally:
        probe.close()
    return None


class _LoopGuard:
    """The task factory of one event loop, screening the unregistered-call requests of the
    servers registered with it and handing every other task to the previous factory."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.cygrpc = _cygrpc()
        self.servers: dict[int, object] = {}
        self.previous = cast(TaskFactory | None, loop.get_task_factory())
        self.rejected = 0
        self._tasks: set[asyncio.Future[object]] = set()
        self._installed: TaskFactory = self._factory  # one bound method, to compare by identity
        loop.set_task_factory(cast(Any, self._installed))  # Any: typeshed's factory is generic

    def _factory(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[object, object, object],
                 **kwargs: Any) -> asyncio.Future[object]:  # Any: the Task's own keywords
        if (self.servers and _qualname(coro) == _REQUEST_CALL
                and _owned_by(coro, self.servers) is not None):
            coro = self._screen(coro)
        if self.previous is not None:
            return self.previous(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def _screen(self, request: Coroutine[object, None, object]) -> NoReturn:
        """Stands in for the coroutine in which the server waits for its next unregistered call:
        answers that call itself and makes the main loop ask for the next one."""
        rpc_state = await request
        self.rejected += 1
        loop = asyncio.get_running_loop()
        try:
            handling = self.cygrpc._handle_rpc("", self.cygrpc._MethodResolver([], {}), (),
                                               rpc_state, loop, False)
            task = loop.create_task(self.cygrpc._schedule_rpc_coro(
                handling, rpc_state, loop, _REJECTED_NAME))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        except Exception:
            # The call is dropped (grpc cancels it when its state is collected); serving goes on.
            log.exception("the liveness guard could not answer an unregistered call")
        if self.rejected == 1:
            log.warning("answered a call to an unregistered method UNIMPLEMENTED (the guard "
                        "answers every such call so; register every service with "
                        "add_registered_method_handlers)")
        else:
            log.debug("answered an unregistered call UNIMPLEMENTED (%d so far)", self.rejected)
        raise self.cygrpc._RequestCallError("unregistered call answered by the liveness guard")

    def remove(self, inner: object, loop: asyncio.AbstractEventLoop) -> None:
        self.servers.pop(id(inner), None)
        if self.servers:
            return
        if loop.get_task_factory() is cast(object, self._installed):
            loop.set_task_factory(cast(Any, self.previous))  # Any: as in __init__
            _GUARDS.pop(loop, None)
        # Otherwise a later factory wraps this one: it stays, passing every task through.


_GUARDS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopGuard] = (
    weakref.WeakKeyDictionary())


def _probe_target(address: str) -> str:
    """Where to connect to reach a server listening on ``address`` from this machine."""
    host, sep, port = address.rpartition(":")
    if not sep:
        return address
    if host in ("", "0.0.0.0", "*"):
        return f"127.0.0.1:{port}"
    if host in ("[::]", "::"):
        return f"[::1]:{port}"
    return address


class ServerLiveness:
    """Guards a grpc.aio server against the non-UTF-8 ``:path`` crash and reports its death.

    ``address`` is where the server listens (``host:port`` as bound; a wildcard host is probed
    on loopback). ``on_dead(reason)`` is awaited once, in a task of its own, when the server is
    found dead; ``stop()`` never cancels it, so it may call the owner's stop (and so ``stop()``).
    ``probe_interval_s=None`` turns the self-probe off (say, for TLS with client certificates and
    no ``channel_credentials`` to hand). Use: ``install_guard()`` before ``server.start()``,
    ``await start()`` after it, ``await stop()`` before ``server.stop()``.
    """

    def __init__(self, server: grpc.aio.Server, address: str,
                 on_dead: Callable[[str], Awaitable[None]] | None = None, *,
                 guard: bool = True,
                 probe_interval_s: float | None = 0.5,
                 probe_timeout_s: float = 2.0,
                 probe_failures: int = 4,
                 probe_service: str = "",
                 channel_credentials: grpc.ChannelCredentials | None = None,
                 channel_options: Sequence[tuple[str, int | str]] = ()) -> None:
        if probe_failures < 1:
            raise ValueError("probe_failures must be at least 1")
        self.server = server
        self.address = address
        self.on_dead = on_dead
        self.probe_interval_s = probe_interval_s
        self.probe_timeout_s = probe_timeout_s
        self.probe_failures = probe_failures
        self.probe_service = probe_service
        self.channel_credentials = channel_credentials
        # A local subchannel pool: each probe opens a connection of its own, not a shared one.
        self.channel_options: list[tuple[str, int | str]] = [
            ("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0),
            *channel_options]
        self.dead = False
        self.reason = ""
        self.guarded = False
        """Whether the guard screens this server's unregistered calls."""
        self.guard_problem: str | None = None
        """Why the guard is off, when it is."""
        self._want_guard = guard
        self._inner = _inner(server)
        self._loop_guard: _LoopGuard | None = None
        self._dead_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._on_dead_task: asyncio.Task[None] | None = None
        self._serving_task: asyncio.Future[object] | None = None
        self._server_ended = False
        self._stopping = False
        self._started = False

    # -- the guard ---------------------------------------------------------------------------

    def install_guard(self) -> bool:
        """Screen this server's unregistered calls from now on; returns whether the guard is on.
        Call it on the event loop, before ``server.start()``: the server asks for its first
        unregistered call as it starts, and a request made before the guard is not screened."""
        if self.guarded or not self._want_guard:
            return self.guarded
        problem = guard_unavailable_reason(self.server)
        if problem is not None:
            self.guard_problem = problem
            log.warning("no guard against non-UTF-8 :path on %s: %s; relying on detection",
                        self.address, problem)
            return False
        if self._is_running():
            log.warning("liveness guard installed after %s started: its first unregistered "
                        "call is not screened", self.address)
        loop = asyncio.get_running_loop()
        loop_guard = _GUARDS.get(loop)
        if loop_guard is None:
            loop_guard = _GUARDS[loop] = _LoopGuard(loop)
        loop_guard.servers[id(self._inner)] = self._inner
        self._loop_guard = loop_guard
        self.guarded = True
        return True

    @property
    def rejected_calls(self) -> int:
        """How many unregistered calls the guard has answered (on this loop, all servers)."""
        return self._loop_guard.rejected if self._loop_guard is not None else 0

    # -- detection ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Install the guard (if not yet), watch the server's main loop and start the probe.
        Call it after ``server.start()``."""
        if self._started:
            return
        self._started = True
        self.install_guard()
        self._watch_serving_task()
        self._tasks.append(asyncio.create_task(self._watch_termination(),
                                               name=f"liveness-termination[{self.address}]"))
        if self.probe_interval_s is not None:
            self._tasks.append(asyncio.create_task(self._probe_loop(),
                                                   name=f"liveness-probe[{self.address}]"))

    async def stop(self) -> None:
        """Stop watching (the owner is about to stop the server) and remove the guard."""
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()
        for task in tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._loop_guard is not None:
            self._loop_guard.remove(self._inner, asyncio.get_running_loop())
            self._loop_guard = None
        self.guarded = False

    async def wait_dead(self) -> str:
        """Return the reason once the server is found dead (never, if it stays alive)."""
        await self._dead_event.wait()
        return self.reason

    def _is_running(self) -> bool:
        is_running = getattr(self._inner, "is_running", None)
        return bool(is_running()) if callable(is_running) else False

    def _watch_serving_task(self) -> bool:
        if self._serving_task is not None:
            return True
        if self._inner is None:
            return False
        owners = {id(self._inner): self._inner}
        for task in asyncio.all_tasks():
            coro = task.get_coro()
            if _qualname(coro) == _MAIN_LOOP and _owned_by(coro, owners) is not None:
                self._serving_task = task
                task.add_done_callback(self._serving_task_done)
                return True
        return False

    def _serving_task_done(self, task: asyncio.Future[object]) -> None:
        if task.cancelled() or task.exception() is None:
            self._server_ended = True  # a shutdown someone asked for
            return
        exc = task.exception()
        self._declare_dead(f"the grpc server's main loop crashed: {type(exc).__name__}: {exc}")

    async def _watch_termination(self) -> None:
        # With a timeout, wait_for_termination shields grpc's shutdown future (without one,
        # cancelling the waiter cancels that future and breaks server.stop()), and it raises
        # the main loop's crash as soon as the timeout passes after it, even while calls that
        # were running keep the shutdown from completing.
        try:
            while await self.server.wait_for_termination(timeout=_TERMINATION_POLL_S):
                pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._declare_dead(f"the grpc server's main loop crashed: {type(exc).__name__}: "
                               f"{exc}")
            return
        self._server_ended = True

    async def _probe_loop(self) -> None:
        assert self.probe_interval_s is not None
        failures = 0
        seen_running = False
        last = ""
        while not self.dead and not self._stopping:
            await asyncio.sleep(self.probe_interval_s)
            self._watch_serving_task()
            seen_running = seen_running or self._is_running()
            if self._server_ended or self._stopping:
                return
            problem = await self.probe()
            if problem is None:
                failures = 0
                seen_running = True
                continue
            if not seen_running or self._server_ended or self._stopping:
                continue  # not up yet, or being stopped on purpose
            failures += 1
            last = problem
            log.warning("liveness probe of %s failed (%d/%d): %s", self.address, failures,
                        self.probe_failures, problem)
            if failures >= self.probe_failures:
                self._declare_dead(f"{failures} health probes of {self.address} in a row got "
                                   f"no answer; the last: {last}")
                return

    async def probe(self) -> str | None:
        """One health Check on a new connection: None if the server answered (whatever the
        status), else what went wrong."""
        from grpc_health.v1 import health_pb2

        target = _probe_target(self.address)
        if self.channel_credentials is None:
            channel = grpc.aio.insecure_channel(target, options=self.channel_options)
        else:
            channel = grpc.aio.secure_channel(target, self.channel_credentials,
                                              options=self.channel_options)
        try:
            check = channel.unary_unary(
                _HEALTH_CHECK,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString)
            await check(health_pb2.HealthCheckRequest(service=self.probe_service),
                        timeout=self.probe_timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _NO_ANSWER:
                return f"{exc.code().name}: {exc.details()}"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(None), self.probe_timeout_s)
        return None

    def _declare_dead(self, reason: str) -> None:
        if self.dead or self._stopping:
            return
        self.dead = True
        self.reason = reason
        log.critical("grpc server on %s is dead: %s", self.address, reason)
        self._dead_event.set()
        if self.on_dead is not None:
            self._on_dead_task = asyncio.get_running_loop().create_task(
                self._run_on_dead(self.on_dead, reason), name=f"liveness-on-dead[{self.address}]")

    async def _run_on_dead(self, on_dead: Callable[[str], Awaitable[None]], reason: str) -> None:
        try:
            await on_dead(reason)
        except Exception:
            log.exception("on_dead of the liveness watch of %s failed", self.address)
