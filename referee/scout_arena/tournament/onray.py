"""The Ray side of a distributed tournament (`distributed.play_distributed` with
``ray_address``): each chunk of the schedule is a Ray task (`ray_chunk`, one CPU, spread over
the nodes) that starts a referee and every bot on the node that runs it, plays the chunk and
returns its finished records as JSON.

Ray runs a task again when its worker process or node dies (``max_retries``), and says nothing
of it to the driver when the new attempt succeeds. So that such a retry is not invisible, every
attempt first tells a small actor of the driver's (`ChunkAttempts`, on the head node, no
CPU) that it started, where, and in which process; an attempt that finds earlier ones reports
them with its result, and the driver lists a ``ray_chunk_retried`` fault saying what became of
each (its node is gone, or only its worker process died). The attempt's number itself comes
from Ray's core worker where it has one (Ray's public API does not give it), so that an attempt
that died before it could tell the actor is still counted. Counting is best effort: a task that
cannot reach the actor plays its chunk all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from ..record import JSON, MatchRecord, record_from_json, record_to_json
from .config import ScheduledMatch, TournamentConfig
from .distributed import (
    BotsReport,
    Deliver,
    DistributedError,
    NodeFault,
    _report_from_json,
    chunked,
    default_chunk_size,
)
from .venue import BotProcess, Venue, new_bots
from .worker import ItemsJSON, bots_report, items_from_json, items_to_json

log = logging.getLogger(__name__)

LOG_TAIL_BYTES = 16_384
ATTEMPTS_TIMEOUT_S = 30.0
"""How long a task waits for the attempts actor (it is created as the tasks are sent)."""


async def play_chunk(config: TournamentConfig, items: Sequence[ScheduledMatch], logs_dir: Path
                     ) -> tuple[list[MatchRecord], dict[str, BotProcess]]:
    """A referee and every bot, started on this machine for ``items`` alone (what one Ray task
    does): the finished records, and what became of each bot."""
    bots = new_bots(config)
    venue = Venue(config, bots, logs_dir, None, die_with_parent=True)
    stop = asyncio.Event()
    await venue.start()
    try:
        await venue.connect(stop)
        records = await venue.play(items, stop)
    finally:
        await venue.close()
    return records, bots


#: ray ships no type information: its module, an actor's handle and a ``ray.nodes()`` entry.
RayModule: TypeAlias = Any  # Any: untyped third-party module
RayActor: TypeAlias = Any  # Any: untyped actor handle
RayNode: TypeAlias = Mapping[str, Any]  # Any: ray.nodes() entries mix value types


def _ray() -> RayModule:
    """The ray module (an optional dependency: ``pip install 'scout-arena[ray]'``), untyped
    here so that the rest type-checks where it is not installed."""
    return importlib.import_module("ray")


def _node_label(node: RayNode, node_id: str) -> str:
    return f"{node.get('NodeName') or node.get('NodeManagerAddress')} ({node_id[:8]})"


def _ray_node_name() -> str:
    ray = _ray()
    node_id = str(ray.get_runtime_context().get_node_id())
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return _node_label(node, node_id)
    return node_id[:8]


def _log_tails(logs: Path) -> dict[str, str]:
    tails = {}
    for path in sorted(logs.glob("*.stderr.log")):
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = f.read().decode(errors="replace")
        if text:
            tails[path.name.removesuffix(".stderr.log")] = text
    return tails


class ChunkAttempts:
    """A Ray actor (see the module's docstring): the attempts of each chunk, as ``[node id,
    worker pid]``, in the order they started."""

    def __init__(self) -> None:
        self.started: dict[int, list[list[object]]] = {}

    def start(self, chunk: int, node_id: str, pid: int) -> list[list[object]]:
        """Note an attempt of ``chunk``; the attempts before it."""
        attempts = self.started.setdefault(chunk, [])
        earlier = list(attempts)
        attempts.append([node_id, pid])
        return earlier

    def count(self, chunk: int) -> int:
        return len(self.started.get(chunk, []))


def _attempt_started(attempts: RayActor, chunk: int | None) -> list[list[object]] | str:
    """Tell the attempts actor (an actor handle) that this attempt of ``chunk`` started; the
    attempts before it, or why the actor could not be reached."""
    if attempts is None or chunk is None:
        return "the run has no attempts actor"
    ray = _ray()
    node_id = str(ray.get_runtime_context().get_node_id())
    try:
        earlier = ray.get(attempts.start.remote(chunk, node_id, os.getpid()),
                          timeout=ATTEMPTS_TIMEOUT_S)
    except ray.exceptions.RayError as exc:
        log.warning("chunk %s: its attempts are not counted (%s)", chunk, exc)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return list(earlier)


def _attempt_number() -> int | None:
    """This task's attempt, counted from 1, as Ray's core worker knows it (not in Ray's public
    API, hence looked up with care: None where it is missing)."""
    worker = getattr(getattr(_ray(), "_private", None), "worker", None)
    core = getattr(getattr(worker, "global_worker", None), "core_worker", None)
    number = getattr(core, "get_current_task_attempt_number", None)
    if number is None:
        return None
    try:
        return int(number()) + 1
    except (TypeError, ValueError, RuntimeError):
        return None


def ray_chunk(config_json: JSON, items_json: ItemsJSON, cwd: str | None,
              chunk: int | None = None, attempts: RayActor = None) -> JSON:
    """The body of one Ray task: `play_chunk` on the node that runs it; returns its name, the
    finished records as JSON, each bot's status and notes, the tail of each bot's stderr, and
    this attempt's number and the earlier attempts of this chunk that `ChunkAttempts` (the
    actor ``attempts``, if any) heard of."""
    earlier = _attempt_started(attempts, chunk)
    attempt = _attempt_number() or (None if isinstance(earlier, str) else len(earlier) + 1)
    if cwd is not None and os.path.isdir(cwd):
        os.chdir(cwd)
    config = TournamentConfig.from_json(config_json)
    logs = Path(tempfile.mkdtemp(prefix="scout-chunk-"))
    try:
        records, bots = asyncio.run(play_chunk(config, items_from_json(items_json), logs))
        return {"node": _ray_node_name(), "records": [record_to_json(r) for r in records],
                "bots": bots_report(bots), "logs": _log_tails(logs), "attempt": attempt,
                "earlier": earlier}
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def _append_logs(logs_dir: Path, node: str, chunk: int, tails: Mapping[str, str]) -> None:
    logs_dir.mkdir(parents=True, exist_ok=True)
    for bot, text in tails.items():
        with (logs_dir / f"{bot}.stderr.log").open("a", encoding="utf-8") as f:
            f.write(f"----- node {node}, chunk {chunk} (last {LOG_TAIL_BYTES} bytes) -----\n")
            f.write(text if text.endswith("\n") else text + "\n")


def _ray_init(ray: RayModule, address: str,
              working_dir: Path | None) -> None:
    """Connect to the cluster, keeping this process's SIGTERM handling (ray.init sets its own,
    which would bypass the tournament's clean stop). A working directory to ship is a job-level
    runtime environment: Ray takes a local folder only here."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    runtime_env = {"working_dir": str(working_dir)} if working_dir is not None else None
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
             runtime_env=runtime_env)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


HEAD_RESOURCE = "node:__internal_head__"
"""The resource only Ray's head node has."""


def _head_node_id(ray: RayModule) -> str | None:
    """The head node, which lives as long as the cluster; the driver's own node may be a
    worker node that dies mid-run (on a one-machine cluster Ray may attach the driver to any)."""
    for node in ray.nodes():
        if node.get("Alive") and HEAD_RESOURCE in node.get("Resources", {}):
            return str(node["NodeID"])
    return None


def _attempts_actor(ray: RayModule) -> RayActor:
    """A `ChunkAttempts` on the head node (it lives as long as the driver's job), or None
    when Ray cannot create it (the run goes on, without counting attempts). The placement is
    strict: a soft one lets Ray put it on a worker node, which may die with its record."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = None
    try:
        head = _head_node_id(ray)
        here = (NodeAffinitySchedulingStrategy(head, soft=False) if head is not None else
                NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                               soft=True))
        actor = ray.remote(ChunkAttempts).options(num_cpus=0, scheduling_strategy=here).remote()
        ray.get(actor.count.remote(-1), timeout=ATTEMPTS_TIMEOUT_S)  # ready before any task
        return actor
    except ray.exceptions.RayError as exc:
        log.warning("where Ray task retries ran is not known: %s", exc)
        if actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        return None


def _raylet_answers(node: RayNode) -> bool:
    """Whether the node's raylet accepts a connection: Ray's own health check takes seconds to
    declare a killed node dead, and a retry can finish before that."""
    try:
        with socket.create_connection((str(node["NodeManagerAddress"]),
                                       int(node["NodeManagerPort"])), timeout=1.0):
            return True
    except (OSError, KeyError, ValueError):
        return False


def _earlier_causes(ray: RayModule, attempt: int, earlier: Sequence[Sequence[object]] | str) -> str:
    """What became of each attempt before ``attempt`` ([node id, pid] each, those the actor
    heard of; or why this attempt could not reach the actor): its node is gone, or only its
    worker process died (Ray retries a task on nothing else: ``retry_exceptions`` is off)."""
    if isinstance(earlier, str):
        return f"where the earlier attempts ran is not known ({earlier})"
    nodes = {str(n.get("NodeID")): n for n in ray.nodes()}
    causes = [] if len(earlier) >= attempt - 1 else [
        f"{attempt - 1 - len(earlier)} attempt(s) died before they could say where they ran"]
    for number, (node_id, pid) in enumerate(earlier, start=1):
        node = nodes.get(str(node_id), {})
        where = _node_label(node, str(node_id)) if node else str(node_id)[:8]
        if node.get("Alive", False) and not _raylet_answers(node):
            causes.append(f"attempt {number} on {where}: its node died (its raylet does not "
                          "answer; Ray has not noticed yet)")
        elif node.get("Alive", False):
            causes.append(f"attempt {number} on {where}: its worker process {pid} died")
        else:
            why = node.get("DeathReasonMessage") or "it left the cluster"
            causes.append(f"attempt {number} on {where}: its node died ({why})")
    return "; ".join(causes)


async def _attempts_of(ray: RayModule, attempts: RayActor, chunk: int) -> int | None:
    if attempts is None:
        return None
    try:
        return int(await asyncio.to_thread(ray.get, attempts.count.remote(chunk),
                                           timeout=ATTEMPTS_TIMEOUT_S))
    except ray.exceptions.RayError:
        return None


async def play_on_ray(config: TournamentConfig, items: Sequence[ScheduledMatch], address: str,
                      deliver: Deliver, on_bots: Callable[[str, BotsReport], None] | None,
                      logs_dir: Path | None, chunk_size: int | None,
                      working_dir: Path | None, stop: asyncio.Event,
                      max_retries: int, on_fault: Callable[[NodeFault], None] | None
                      ) -> list[NodeFault]:
    """`distributed.play_distributed` on the Ray cluster at ``address``: the faults."""
    try:
        ray = _ray()
    except ImportError as exc:
        raise DistributedError("--ray needs Ray: pip install 'scout-arena[ray]'") from exc
    owner = not ray.is_initialized()
    if owner:
        _ray_init(ray, address, working_dir)
    elif working_dir is not None:
        raise DistributedError("working_dir is shipped when play_distributed connects to Ray "
                               "itself; Ray is already initialised in this process (give "
                               "ray.init a runtime_env with the working_dir instead)")
    refs: dict[object, tuple[int, list[ScheduledMatch]]] = {}
    problems: list[NodeFault] = []

    def fault(made: NodeFault) -> None:
        log.warning(made.detail)
        problems.append(made)
        if on_fault is not None:
            on_fault(made)

    attempts = None
    try:
        slots = int(ray.cluster_resources().get("CPU", 1))
        size = chunk_size or default_chunk_size(len(items), slots, config.concurrency)
        options: dict[str, object] = {"num_cpus": 1, "max_retries": max_retries,
                                      "retry_exceptions": False, "scheduling_strategy": "SPREAD"}
        task = ray.remote(ray_chunk).options(**options)
        attempts = await asyncio.to_thread(_attempts_actor, ray)
        cwd = None if working_dir is not None else os.getcwd()
        config_json = config.to_json()
        for index, chunk in enumerate(chunked(items, size)):
            refs[task.remote(config_json, items_to_json(chunk), cwd, index, attempts)] = \
                (index, chunk)
        while refs and not stop.is_set():
            ready, _ = await asyncio.to_thread(ray.wait, list(refs), num_returns=1,
                                               timeout=0.5)
            for ref in ready:
                index, chunk = refs.pop(ref)
                try:
                    result = await asyncio.to_thread(ray.get, ref)
                except ray.exceptions.RayError as exc:
                    fault(NodeFault("ray_chunk_failed", "ray", f"chunk {index} ({len(chunk)} "
                                    f"matches) failed: {exc}", index, len(chunk),
                                    await _attempts_of(ray, attempts, index)))
                    continue
                node = str(result["node"])
                attempt = result.get("attempt")
                if isinstance(attempt, int) and attempt > 1:
                    causes = await asyncio.to_thread(_earlier_causes, ray, attempt,
                                                     result["earlier"])
                    fault(NodeFault(
                        "ray_chunk_retried", node, f"chunk {index} ({len(chunk)} matches) "
                        f"finished on attempt {attempt}, on {node}, and was played again from "
                        f"its start: {causes}", index, len(chunk), attempt))
                if on_bots is not None:
                    on_bots(node, _report_from_json(result["bots"]))
                if logs_dir is not None:
                    _append_logs(logs_dir, node, index, result["logs"])
                for data in result["records"]:
                    deliver(record_from_json(data),
                            (json.dumps(data, separators=(",", ":")) + "\n").encode())
    finally:
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if attempts is not None:
            with contextlib.suppress(Exception):
                ray.kill(attempts)
        if owner:
            ray.shutdown()
    return problems
